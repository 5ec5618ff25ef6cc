"""A scenario of the second outside review of trace reuse (see test_trace_review.py)."""

import dataclasses


@dataclasses.dataclass(frozen=True)
class L(list):
    k: int = 0


l = L()
l.append(2.0)
mk = lambda c: jax.jit(lambda v: v * c[0])
show("l[0]=2", lambda: mk(l)(x))
l[0] = 9.0
show("l[0]=9", lambda: mk(l)(x))
