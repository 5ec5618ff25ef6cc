# Review 28 (getattr_ctx): a false hit of snapshot cf8864b (plain stdlib modules reading frames or a module's namespace by name, getattr with a constant name, numpy print options), refused since.
import functools, sys


def f(x):
    try:
        raise ValueError
    except ValueError as e:
        c = getattr(e, "__context__")
    return x * (2.0 if c is None else 3.0)


show("a", lambda: jax.jit(functools.partial(f))(x))
try:
    raise KeyError
except KeyError:
    show("b", lambda: jax.jit(functools.partial(f))(x))
