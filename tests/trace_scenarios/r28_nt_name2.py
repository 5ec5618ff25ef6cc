# Review 28 (nt_name2): a false hit of snapshot cf8864b (plain stdlib modules reading frames or a module's namespace by name, getattr with a constant name, numpy print options), refused since.
import collections, functools, sys


def f(x):
    return x * float(len(collections.namedtuple("P", "a").__module__))


for n in ("__main__", "abcdefghijk"):
    globals()["__name__"] = n
    show(f"n{n}", lambda: jax.jit(functools.partial(f))(x))
globals()["__name__"] = "__main__"
