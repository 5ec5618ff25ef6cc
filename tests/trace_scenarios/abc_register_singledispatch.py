"""A scenario of the second outside review of trace reuse (see test_trace_review.py)."""

import abc, functools


class Scalar(abc.ABC):
    pass


mk = lambda P: jax.jit(lambda v: v * (2.0 if isinstance(2.0, P) else 10.0))
show("unregistered", lambda: mk(Scalar)(x))
Scalar.register(float)
show("registered", lambda: mk(Scalar)(x))


@functools.singledispatch
def scale(v):
    return 2.0


mk2 = lambda: jax.jit(lambda v: v * scale(1.0))
show("sd-default", lambda: mk2()(x))
scale.register(float, lambda v: 3.0)
show("sd-float", lambda: mk2()(x))
