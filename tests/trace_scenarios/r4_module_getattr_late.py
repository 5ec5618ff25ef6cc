"""A scenario of the fourth outside review of trace reuse (see test_trace_review.py)."""

import sys, types

cfg = types.ModuleType("cfg_s22")
sys.modules["cfg_s22"] = cfg


def scale():
    try:
        return cfg.lr
    except AttributeError:
        return 1.0


mk = lambda: jax.jit(lambda v: v * scale())
show("no lr", lambda: mk()(x))
cfg.__getattr__ = lambda name: 5.0 if name == "lr" else (_ for _ in ()).throw(AttributeError(name))
show("module __getattr__ gives lr=5", lambda: mk()(x))
