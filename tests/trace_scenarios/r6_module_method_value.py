"""A user module's __getattribute__ held as a value (a method-wrapper bound to the
module): keyed like a builtin module's function, by identity."""

import sys, types

cfg = types.ModuleType("cfg_r6b")
cfg.scale = 2.0
sys.modules["cfg_r6b"] = cfg

GA = cfg.__getattribute__
mk = lambda: jax.jit(lambda v: v * GA("scale"))
show("scale2", lambda: mk()(x))
cfg.scale = 3.0
show("scale3", lambda: mk()(x))
