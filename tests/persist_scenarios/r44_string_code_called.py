# Review 44 (g2): the same, called from a user function.
import os, types, collections

K = 2.0 if os.environ.get("PHASE") == "A" else 3.0
_src = "def g(a):\n    return a * __import__('__main__').K\n"
g = types.FunctionType(compile(_src, "<string>", "exec").co_consts[0], vars(collections), "g")


def f(a):
    return g(a) + 1.0


show("f", lambda: jax.jit(f)(x))
