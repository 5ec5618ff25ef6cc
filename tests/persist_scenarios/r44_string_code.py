# Review 44 (g1): user code compiled as "<string>" given a library module's globals is not library code (proven by content since).
import os, types, collections

K = 2.0 if os.environ.get("PHASE") == "A" else 3.0
_src = "def g(a):\n    return a * __import__('__main__').K\n"
g = types.FunctionType(compile(_src, "<string>", "exec").co_consts[0], vars(collections), "g")
show("g", lambda: jax.jit(g)(x))
