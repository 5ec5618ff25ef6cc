"""A scenario of the second outside review of trace reuse (see test_trace_review.py)."""

mk = lambda dt: jax.jit(lambda v: v * dt.metadata["s"])
show("s=2", lambda: mk(np.dtype(np.float32, metadata={"s": 2.0}))(x))
show("s=3", lambda: mk(np.dtype(np.float32, metadata={"s": 3.0}))(x))
