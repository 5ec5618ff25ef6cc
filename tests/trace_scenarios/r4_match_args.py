"""A scenario of the fourth outside review of trace reuse (see test_trace_review.py)."""

import dataclasses


@dataclasses.dataclass(frozen=True)
class Pt:
    a: float
    b: float


def mk(p):
    def f(v):
        match p:
            case Pt(first, second):
                return v * first - second

    return jax.jit(f)


p = Pt(2.0, 1.0)
show("match a,b", lambda: mk(p)(x))
Pt.__match_args__ = ("b", "a")
show("match b,a", lambda: mk(p)(x))
