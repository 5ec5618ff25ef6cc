"""A scenario of the fourth outside review of trace reuse (see test_trace_review.py)."""

import operator


def mk(m1, m2):
    return jax.jit(lambda v: m2(m1(v)))


show(
    "f32,f16",
    lambda: mk(
        operator.methodcaller("astype", dtype=jnp.float32),
        operator.methodcaller("astype", dtype=jnp.float16),
    )(x),
)
show(
    "f32,i32",
    lambda: mk(
        operator.methodcaller("astype", dtype=jnp.float32),
        operator.methodcaller("astype", dtype=jnp.int32),
    )(x),
)
