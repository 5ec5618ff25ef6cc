# Review 28 (enum_glob): a false hit of snapshot cf8864b (plain stdlib modules reading frames or a module's namespace by name, getattr with a constant name, numpy print options), refused since.
import enum, sys, functools


def f(x):
    enum.global_enum(enum.IntEnum("E", "ZZ"))
    return x * 2


for i in range(2):
    globals().pop("ZZ", None)
    show(f"s{i}", lambda: jax.jit(functools.partial(f))(x))
    show(f"g{i}", lambda: float("ZZ" in globals()))
