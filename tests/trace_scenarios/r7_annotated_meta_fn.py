"""A dataclass schema whose fields are annotated with transforms (typing.Annotated
metadata); the trace runs the transform found in the annotation, which reads a global."""

import dataclasses
from typing import Annotated

SCALE = 2.0


def scaled(v):
    return v * SCALE


@dataclasses.dataclass
class Schema:
    w: Annotated[float, scaled] = 1.0


def apply(v):
    for f in dataclasses.fields(Schema):
        v = f.type.__metadata__[0](v)
    return v


mk = lambda: jax.jit(lambda v: apply(v))
show("S=2", lambda: mk()(x))
SCALE = 3.0
show("S=3", lambda: mk()(x))
