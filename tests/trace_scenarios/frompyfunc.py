"""A scenario of the second outside review of trace reuse (see test_trace_review.py)."""

S = [2.0]
uf = np.frompyfunc(lambda v: v * S[0], 1, 1)
mk = lambda: jax.jit(lambda v: v * float(uf(1.0)))
show("S=2", lambda: mk()(x))
S[0] = 3.0
show("S=3", lambda: mk()(x))
