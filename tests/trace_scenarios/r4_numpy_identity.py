"""A scenario of the fourth outside review of trace reuse (see test_trace_review.py)."""

TABLE = np.array([2.0, 3.0], np.float32)


def mk(tab):
    return jax.jit(lambda v: v * (10.0 if tab is TABLE else 1.0) * tab[0])


show("alias", lambda: mk(TABLE)(x))
show("copy", lambda: mk(TABLE.copy())(x))
