# Review 28 (enum_conv2): a false hit of snapshot cf8864b (plain stdlib modules reading frames or a module's namespace by name, getattr with a constant name, numpy print options), refused since.
import enum, sys, functools


def flt(n):
    return n.startswith("K_")


def f(x):
    E = enum.IntEnum._convert_("E", "__main__", flt)
    return x * float(len(E))


K_A = 1
show("a", lambda: jax.jit(functools.partial(f))(x))
K_B = 2
show("b", lambda: jax.jit(functools.partial(f))(x))
