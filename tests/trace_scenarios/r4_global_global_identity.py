"""A scenario of the fourth outside review of trace reuse (see test_trace_review.py)."""

DEFAULT = {"lr": 2.0}
CFG = DEFAULT
mk = lambda: jax.jit(lambda v: v * CFG["lr"] * (10.0 if CFG is DEFAULT else 1.0))
show("CFG is DEFAULT", lambda: mk()(x))
CFG = dict(DEFAULT)
show("CFG copy", lambda: mk()(x))
