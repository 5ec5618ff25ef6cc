"""A scenario of the fourth outside review of trace reuse (see test_trace_review.py)."""

import types

box = [2.0]


def h2(v):
    t = ("PLACEHOLDER",)
    return v * t[0][0]


cs = tuple((box,) if c == ("PLACEHOLDER",) else c for c in h2.__code__.co_consts)
code = h2.__code__.replace(co_consts=cs)


def mk():
    return jax.jit(types.FunctionType(code, globals(), "h2"))


show("box=2", lambda: mk()(x))
box[0] = 3.0
show("box=3", lambda: mk()(x))
