"""A scenario of the third outside review of trace reuse (see test_trace_review.py)."""


# A user class's bookkeeping attributes (__doc__, __annotations__) are skipped.
class Cfg:
    """2.0"""


mk = lambda: jax.jit(lambda v: v * float(Cfg.__doc__))
show("2", lambda: mk()(x))
Cfg.__doc__ = "3.0"
show("3", lambda: mk()(x))
