"""A scenario of the third outside review of trace reuse (see test_trace_review.py)."""


# Attributes set on a jit object are not part of its ("J") key.
def mk(k):
    def f(v):
        return v * jf.scale

    jf = jax.jit(f)
    jf.scale = k
    return jf


show("2", lambda: mk(2.0)(x))
show("3", lambda: mk(3.0)(x))
