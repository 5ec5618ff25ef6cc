"""A scenario of the second outside review of trace reuse (see test_trace_review.py)."""

import builtins, pkgutil

S = 2.0


def helper():
    pass


fs = {
    "getattr": lambda: jax.jit(lambda v: v * getattr(helper, "__globals__")["S"]),
    "builtins.globals": lambda: jax.jit(lambda v: v * builtins.globals()["S"]),
    "builtins.eval": lambda: jax.jit(lambda v: v * builtins.eval("S")),
    "pkgutil": lambda: jax.jit(lambda v: v * pkgutil.resolve_name("__main__:S")),
}
for k, mk in fs.items():
    show(k + " S=2", lambda: mk()(x))
S = 3.0
for k, mk in fs.items():
    show(k + " S=3", lambda: mk()(x))
