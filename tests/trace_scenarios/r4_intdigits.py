"""A scenario of the fourth outside review of trace reuse (see test_trace_review.py)."""

import sys

s = "1" * 5000
mk = lambda: jax.jit(lambda v: v * (len(str(int(s))) // 1000))
show("default limit", lambda: mk()(x))
sys.set_int_max_str_digits(0)
show("nolimit", lambda: mk()(x))
sys.set_int_max_str_digits(4300)
show("limit again", lambda: mk()(x))
