"""A scenario of the second outside review of trace reuse (see test_trace_review.py)."""

from jax import lax


class GD(lax.ConvDimensionNumbers):
    pass  # no __slots__: instances have a __dict__


gd = GD((0, 1), (0, 1), (0, 1))
gd.extra = 2.0
mk = lambda g: jax.jit(lambda v: v * g.extra)
show("extra=2", lambda: mk(gd)(x))
gd.extra = 5.0
show("extra=5", lambda: mk(gd)(x))
