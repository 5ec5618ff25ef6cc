# Review 28 (log_stack2): a false hit of snapshot cf8864b (plain stdlib modules reading frames or a module's namespace by name, getattr with a constant name, numpy print options), refused since.
import logging, functools, sys


def f(x):
    return x * float(sum(map(ord, logging.getLogger("a").findCaller(True)[3])))


def step():
    return jax.jit(functools.partial(f))(x)


show("a", step)
show("b", step)
