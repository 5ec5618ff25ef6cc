"""A dataclass schema whose field annotation carries a bounds object
(Annotated[float, Bounds(...)]); the bounds are changed and the trace clips by them."""

import dataclasses
from typing import Annotated


class Bounds:
    def __init__(self, lo, hi):
        self.lo, self.hi = lo, hi


B = Bounds(0.0, 1.0)


@dataclasses.dataclass
class Schema:
    w: Annotated[float, B] = 0.5


def clip(v):
    for f in dataclasses.fields(Schema):
        meta = f.type.__metadata__[0]
        v = jnp.clip(v, meta.lo, meta.hi)
    return v


mk = lambda: jax.jit(lambda v: clip(v))
show("hi=1", lambda: mk()(x))
B.hi = 1.5
show("hi=1.5", lambda: mk()(x))
