# Review 28 (getattr_ag): a false hit of snapshot cf8864b (plain stdlib modules reading frames or a module's namespace by name, getattr with a constant name, numpy print options), refused since.
import functools, sys, operator

K = 1.0


def g():
    pass


def f(x):
    name = "".join(["__glo", "bals__"])
    return x * getattr(operator, "attrgetter")(name)(g)["K"]


for k in (1.0, 2.0):
    K = k
    show(f"k{k}", lambda: jax.jit(functools.partial(f))(x))
