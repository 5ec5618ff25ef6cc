"""A scenario of the third outside review of trace reuse (see test_trace_review.py)."""

# The trace writes process state through an API (numpy error mode, decimal context).
import decimal


def mk():
    def f(v):
        np.seterr(over="raise")
        decimal.getcontext().prec = 3
        return v * 2

    return jax.jit(f)


def step():
    np.seterr(over="ignore")
    decimal.getcontext().prec = 28
    mk()(x)
    try:
        np.float32(3e38) * np.float32(10)
        err = 0.0
    except FloatingPointError:
        err = 1.0
    return np.array([len(str(decimal.Decimal(1) / decimal.Decimal(3))), err], np.float32)


show("s1", step)
show("s2", step)
