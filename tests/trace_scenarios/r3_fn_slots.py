"""A scenario of the third outside review of trace reuse (see test_trace_review.py)."""


# Function attributes outside __dict__ are not keyed: __annotations__, __doc__, __module__.
def mk_a(k):
    def f(v: k):
        return v * f.__annotations__["v"]

    return jax.jit(f)


show("annot2", lambda: mk_a(2.0)(x))
show("annot3", lambda: mk_a(3.0)(x))


def mk_d(k):
    def f(v):
        return v * float(f.__doc__)

    f.__doc__ = str(k)
    return jax.jit(f)


show("doc2", lambda: mk_d(2.0)(x))
show("doc3", lambda: mk_d(3.0)(x))


def mk_m(k):
    def f(v):
        return v * len(f.__module__)

    f.__module__ = "m" * k
    return jax.jit(f)


show("mod2", lambda: mk_m(2)(x))
show("mod3", lambda: mk_m(3)(x))
