"""A scenario of the third outside review of trace reuse (see test_trace_review.py)."""

# str.format's field syntax reaches attributes: "{0.__globals__[S]}".
S = 2.0


def helper(v):
    return v


mk = lambda: jax.jit(lambda v: v * float("{0.__globals__[S]}".format(helper)))
show("2", lambda: mk()(x))
S = 3.0
show("3", lambda: mk()(x))
