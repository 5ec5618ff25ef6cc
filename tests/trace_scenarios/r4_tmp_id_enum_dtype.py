"""A scenario of the fourth outside review of trace reuse (see test_trace_review.py)."""

import enum


class Mode(enum.Enum):
    A = 1


def mk(m, dt):
    return jax.jit(lambda v: v * dt.metadata["s"] * m.value)


show("s=2", lambda: mk(Mode.A, np.dtype(np.float32, metadata={"s": 2.0}))(x))
show("s=3", lambda: mk(Mode.A, np.dtype(np.float32, metadata={"s": 3.0}))(x))
