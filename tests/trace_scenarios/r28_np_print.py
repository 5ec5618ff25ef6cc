# Review 28 (np_print): a false hit of snapshot cf8864b (plain stdlib modules reading frames or a module's namespace by name, getattr with a constant name, numpy print options), refused since.
import functools, sys


def f(x):
    return x * float(len(repr(np.float64(1 / 3))))


show("a", lambda: jax.jit(functools.partial(f))(x))
np.set_printoptions(legacy="1.25")
show("b", lambda: jax.jit(functools.partial(f))(x))
np.set_printoptions(legacy=False)
