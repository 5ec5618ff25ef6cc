"""A scenario of the third outside review of trace reuse (see test_trace_review.py)."""

# A reflective name inside a tuple constant is not seen by the constant scan.
import functools

S = 2.0


def helper(v):
    return v


mk = lambda: jax.jit(lambda v: v * functools.reduce(getattr, ("__globals__",), helper)["S"])
show("2", lambda: mk()(x))
S = 3.0
show("3", lambda: mk()(x))
