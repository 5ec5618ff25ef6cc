"""A scenario of the fourth outside review of trace reuse (see test_trace_review.py)."""


def mk(d1, d2):
    return jax.jit(lambda v: v * d1.metadata["s"] * d2.metadata["s"])


show(
    "1*2",
    lambda: mk(
        np.dtype(np.float32, metadata={"s": 1.0}), np.dtype(np.float32, metadata={"s": 2.0})
    )(x),
)
show(
    "1*3",
    lambda: mk(
        np.dtype(np.float32, metadata={"s": 1.0}), np.dtype(np.float32, metadata={"s": 3.0})
    )(x),
)
