"""A user module's attribute read and written through the module's own dunder methods
with constant names (no getattr/setattr, no escape of the module object)."""

import sys, types

cfg = types.ModuleType("cfg_r6")
cfg.scale = 2.0
cfg.traces = 0
sys.modules["cfg_r6"] = cfg
import cfg_r6


def f(v):
    cfg_r6.__setattr__("traces", 1)  # trace-time write, not read back
    return v * cfg_r6.__getattribute__("scale")


mk = lambda: jax.jit(lambda v: f(v))
show("scale2", lambda: mk()(x))
cfg.traces = 0
cfg.scale = 3.0
show("scale3", lambda: mk()(x))
show("traces", lambda: np.float32(cfg.traces))
