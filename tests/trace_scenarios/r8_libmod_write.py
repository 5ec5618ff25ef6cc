"""Trace-time write to an attribute of a library module object held in a user
namespace (functools used as a scratch namespace)."""

import types
import functools as ns


def step(v):
    ns.traced = True
    return v * 2


mk = lambda: jax.jit(lambda v: step(v))
for i in range(3):
    ns.traced = False
    show(f"step{i}", lambda: mk()(x))
    print("written", ns.traced)
