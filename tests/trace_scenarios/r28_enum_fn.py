# Review 28 (enum_fn): a false hit of snapshot cf8864b (plain stdlib modules reading frames or a module's namespace by name, getattr with a constant name, numpy print options), refused since.
import enum, functools, sys


def f(x):
    return x * float(len(enum.Enum("E", "A B").__module__))


for n in ("__main__", "abcdefghijk"):
    globals()["__name__"] = n
    show(f"n{n}", lambda: jax.jit(functools.partial(f))(x))
globals()["__name__"] = "__main__"
