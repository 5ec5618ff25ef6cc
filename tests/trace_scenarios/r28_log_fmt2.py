# Review 28 (log_fmt2): a false hit of snapshot cf8864b (plain stdlib modules reading frames or a module's namespace by name, getattr with a constant name, numpy print options), refused since.
import logging, functools, sys

K = 1.0


def g():
    pass


def f(x):
    fmt = "".join(["{m.__glo", "bals__[K]}"])
    rec = logging.makeLogRecord({"m": g})
    s = logging.StrFormatStyle(fmt)._format(rec)
    return x * float(s)


for k in (1.0, 2.0):
    K = k
    show(f"k{k}", lambda: jax.jit(functools.partial(f))(x))
