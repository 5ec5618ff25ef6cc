"""A scenario of the third outside review of trace reuse (see test_trace_review.py)."""

# pickle resolves a module global by name.
import pickle

S = 2.0
mk = lambda: jax.jit(lambda v: v * pickle.loads(b"c__main__\nS\n."))
show("2", lambda: mk()(x))
S = 3.0
show("3", lambda: mk()(x))
