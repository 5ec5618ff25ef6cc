"""A scenario of the second outside review of trace reuse (see test_trace_review.py)."""

import enum

DEFAULT = 2.0


class Mode(enum.Enum):
    A = 2.0
    B = 3.0

    @classmethod
    def _missing_(cls, value):
        return cls(DEFAULT)


mk = lambda M: jax.jit(lambda v: v * M("unknown").value)
show("DEFAULT=2", lambda: mk(Mode)(x))
DEFAULT = 3.0
show("DEFAULT=3", lambda: mk(Mode)(x))
