"""A scenario of the second outside review of trace reuse (see test_trace_review.py)."""

import decimal, warnings

mk = lambda: jax.jit(lambda v: v * float(np.float32(1) / np.float32(0) > 0))
show("seterr warn", lambda: mk()(x))
np.seterr(all="raise")
show("seterr raise", lambda: mk()(x))
np.seterr(all="warn")
mk3 = lambda: jax.jit(lambda v: v * float(decimal.Decimal(1) / decimal.Decimal(3)))
show("prec28", lambda: mk3()(x))
decimal.getcontext().prec = 2
show("prec2", lambda: mk3()(x))
