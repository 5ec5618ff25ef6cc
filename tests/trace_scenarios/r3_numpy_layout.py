"""A scenario of the third outside review of trace reuse (see test_trace_review.py)."""


# A captured numpy array is keyed by C-order bytes: its layout/flags are not.
def mk(a):
    return jax.jit(lambda v: v * (2.0 if np.isfortran(a) else 1.0))


a = np.arange(4.0, dtype=np.float32).reshape(2, 2)
show("C", lambda: mk(np.ascontiguousarray(a))(x))
show("F", lambda: mk(np.asfortranarray(a))(x))
