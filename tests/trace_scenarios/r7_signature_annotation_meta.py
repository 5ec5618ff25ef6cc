"""A Signature computed once (module level) and held in a global; the trace reads a
parameter's Annotated metadata object, whose attribute is changed."""

import inspect
from typing import Annotated


class Unit:
    factor = 2.0


def spec(v: Annotated[float, Unit]):
    pass


SIG = inspect.signature(spec)


def apply(v):
    return v * SIG.parameters["v"].annotation.__metadata__[0].factor


mk = lambda: jax.jit(lambda v: apply(v))
show("f=2", lambda: mk()(x))
Unit.factor = 3.0
show("f=3", lambda: mk()(x))
