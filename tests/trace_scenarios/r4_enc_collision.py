"""A scenario of the fourth outside review of trace reuse (see test_trace_review.py)."""

import math


def mk(c):
    return jax.jit(lambda v: v * (2.0 if isinstance(c, int) else 3.0))


show("int id(math)", lambda: mk(id(math))(x))
show("module math", lambda: mk(math)(x))


def mk2(c):
    return jax.jit(lambda v: v * (2.0 if isinstance(c, str) else 3.0))


show("str *", lambda: mk2("*")(x))
show("leaf treedef", lambda: mk2(jax.tree_util.tree_structure(1.0))(x))
