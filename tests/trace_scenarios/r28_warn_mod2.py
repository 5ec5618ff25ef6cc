# Review 28 (warn_mod2): a false hit of snapshot cf8864b (plain stdlib modules reading frames or a module's namespace by name, getattr with a constant name, numpy print options), refused since.
import warnings, _warnings, sys, functools

_saved = warnings.filters[:]
warnings.simplefilter("ignore")
warnings.filterwarnings("error", module="zz")


def f(x):
    _warnings.warn("w")
    return x * 2


for n in ("__main__", "zz"):
    globals()["__name__"] = n
    show(f"n{n}", lambda: jax.jit(functools.partial(f))(x))
globals()["__name__"] = "__main__"
warnings.filters[:] = _saved  # (the next scenarios run in this process)
