"""A scenario of the second outside review of trace reuse (see test_trace_review.py)."""

import sys, types

cfg = types.ModuleType("cfg")
cfg.scale = 2.0
sys.modules["cfg"] = cfg
import cfg

mk = lambda: jax.jit(lambda v: v * cfg.scale)
show("plain", lambda: mk()(x))


class M(types.ModuleType):
    @property
    def scale(self):
        return 3.0


cfg.__class__ = M
show("property", lambda: mk()(x))
