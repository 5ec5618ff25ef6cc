# Review 28 (getattr_fmt): a false hit of snapshot cf8864b (plain stdlib modules reading frames or a module's namespace by name, getattr with a constant name, numpy print options), refused since.
import functools, sys

K = 1.0


def g():
    pass


def f(x):
    fmt = "".join(["{m.__glo", "bals__[K]}"])
    return x * float(getattr(fmt, "format")(m=g))


for k in (1.0, 2.0):
    K = k
    show(f"k{k}", lambda: jax.jit(functools.partial(f))(x))
