"""A scenario of the third outside review of trace reuse (see test_trace_review.py)."""

# `in` tests identity before ==: a NaN object found or not, with equal bits.
NAN = float("nan")


def mk(vals):
    return jax.jit(lambda v: v * (2.0 if NAN in vals else 3.0))


show("same-obj", lambda: mk([NAN])(x))
show("other-obj", lambda: mk([float("nan")])(x))
