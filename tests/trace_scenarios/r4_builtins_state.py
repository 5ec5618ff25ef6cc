"""A scenario of the fourth outside review of trace reuse (see test_trace_review.py)."""

import builtins

builtins.APP_SCALE = [2.0]
mk = lambda: jax.jit(lambda v: v * APP_SCALE[0])
show("scale=2", lambda: mk()(x))
APP_SCALE[0] = 3.0
show("scale=3", lambda: mk()(x))
