"""A scenario of the fourth outside review of trace reuse (see test_trace_review.py)."""

import collections

Pt = collections.namedtuple("Pt", "a b", module="collections")
Pt.scale = 2.0


def mk(p):
    return jax.jit(lambda v: v * p.a * p.scale)


show("scale=2", lambda: mk(Pt(1.0, 0.0))(x))
Pt.scale = 3.0
show("scale=3", lambda: mk(Pt(1.0, 0.0))(x))
