"""A scenario of the third outside review of trace reuse (see test_trace_review.py)."""


# A tuple subclass with `_fields` is walked through its own __iter__.
class T(tuple):
    _fields = ()

    def __iter__(self):
        return iter(())


def mk(c):
    return jax.jit(lambda v: v * c[0])


show("2", lambda: mk(T((2.0,)))(x))
show("3", lambda: mk(T((3.0,)))(x))
