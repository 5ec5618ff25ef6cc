"""A scenario of the second outside review of trace reuse (see test_trace_review.py)."""

import builtins

g = {"__builtins__": dict(vars(builtins), scale=lambda: 2.0), "jax": jax}
code = compile("def mk():\n    return jax.jit(lambda v: v * scale())\n", "<s>", "exec")
exec(code, g)
show("scale=2", lambda: g["mk"]()(x))
g["__builtins__"] = dict(vars(builtins), scale=lambda: 3.0)
exec(code, g)
show("scale=3", lambda: g["mk"]()(x))
