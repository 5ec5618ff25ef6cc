"""A scenario of the third outside review of trace reuse (see test_trace_review.py)."""

# Identity between a captured value and a global: keyed by value in separate walks.
DEFAULT = [1.0, 2.0]


def mk(opts):
    return jax.jit(lambda v: v * (10.0 if opts is DEFAULT else 1.0) * opts[0])


show("alias", lambda: mk(DEFAULT)(x))
show("copy", lambda: mk(list(DEFAULT))(x))
