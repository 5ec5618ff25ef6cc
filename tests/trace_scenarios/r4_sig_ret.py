"""A scenario of the fourth outside review of trace reuse (see test_trace_review.py)."""

import inspect


def mk(sig):
    return jax.jit(lambda v: v * sig.return_annotation)


show("ret=2", lambda: mk(inspect.Signature(return_annotation=2.0))(x))
show("ret=3", lambda: mk(inspect.Signature(return_annotation=3.0))(x))
