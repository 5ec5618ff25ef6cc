"""A trace-time write to an attribute of a user-made Primitive (held by identity):
stock writes on every trace, a reuse skips it."""

from jax.extend.core import Primitive

P = Primitive("r6_counter")
P.traced = 0


def f(v):
    setattr(P, "traced", 1)
    return v


mk = lambda: jax.jit(lambda v: f(v))
show("a", lambda: mk()(x))
P.traced = 0
show("b", lambda: mk()(x))
show("traced", lambda: np.float32(P.traced))
