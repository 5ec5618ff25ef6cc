"""A scenario of the second outside review of trace reuse (see test_trace_review.py)."""

import math, collections

ns = {"__name__": "not_imported", "math": math}
exec(
    "class K:\n    f = math.sqrt\n", ns
)  # heap class of C attributes only, module not in sys.modules: 'compiled'
K = ns["K"]
mk = lambda k: jax.jit(lambda v: v * k.f(4.0))
show("sqrt", lambda: mk(K)(x))
K.f = math.exp
show("exp", lambda: mk(K)(x))


class Cfg2:
    __module__ = "collections"  # __module__ string + only library functions: judged library
    scale = 2.0
    helper = collections.namedtuple


mk2 = lambda: jax.jit(lambda v: v * Cfg2.scale)
show("scale=2", lambda: mk2()(x))
Cfg2.scale = 3.0
show("scale=3", lambda: mk2()(x))
