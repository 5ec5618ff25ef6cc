"""A scenario of the fourth outside review of trace reuse (see test_trace_review.py)."""


class Op:
    def scale(self):
        return 2.0


def mk():
    return jax.jit(lambda v: v * Op().scale())


show("concrete", lambda: mk()(x))
show("concrete2", lambda: mk()(x))
Op.__abstractmethods__ = frozenset({"scale"})
show("abstract", lambda: mk()(x))
