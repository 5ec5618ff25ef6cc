"""A scenario of the third outside review of trace reuse (see test_trace_review.py)."""

# Reflection with a computed attribute name.
S = 2.0


def helper(v):
    return v


def mk():
    def f(v):
        k = "globals"
        return v * getattr(helper, f"__{k}__")["S"]

    return jax.jit(f)


show("2", lambda: mk()(x))
S = 3.0
show("3", lambda: mk()(x))
