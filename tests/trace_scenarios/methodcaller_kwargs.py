"""A scenario of the second outside review of trace reuse (see test_trace_review.py)."""

import operator

mk = lambda mc: jax.jit(lambda v: mc(v))
show("f16", lambda: mk(operator.methodcaller("astype", dtype=jnp.float16))(x))
show("i32", lambda: mk(operator.methodcaller("astype", dtype=jnp.int32))(x))
