"""A scenario of the second outside review of trace reuse (see test_trace_review.py)."""

mk = lambda: jax.jit(lambda v, s: v * s, static_argnums=1)
y = 1.0 - x
show("s=0.0", lambda: mk()(y, 0.0))
show("s=-0.0", lambda: mk()(y, -0.0))
