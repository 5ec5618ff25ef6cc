"""A scenario of the fourth outside review of trace reuse (see test_trace_review.py)."""

import decimal

mk = lambda: jax.jit(lambda v: v * float(decimal.Decimal(1) / decimal.Decimal(3)))


def step():
    decimal.getcontext().clear_flags()
    out = mk()(x)
    return np.array([float(decimal.getcontext().flags[decimal.Inexact])], np.float32)


show("s1", step)
show("s2", step)
