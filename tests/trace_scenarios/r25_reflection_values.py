# Review 25: reflection reached through values: str.format and string.Formatter.format held (a format string built while tracing), the attrgetter class reached by type() of a held attrgetter, pickle.Unpickler held (its class from a reflective module).
# ruff: noqa: F811

FMT = str.format
K = 1.0


def helper():
    return 0


def mk():
    fm, h = FMT, helper

    def f(x):
        s = "{0." + chr(95) * 2 + "glo" + "bals" + chr(95) * 2 + "[K]}"
        return x * float(fm(s, h))

    return jax.jit(f)


for k in (1.0, 2.0, 3.0):
    K = k
    show(f"a2_strformat-{k}", lambda: mk()(x))

import operator

AG = operator.attrgetter("real")
K = 1.0


def helper():
    return 0


def mk():
    ag, h = AG, helper

    def f(x):
        name = chr(95) * 2 + "glo" + "bals" + chr(95) * 2
        g = type(ag)(name)(h)
        return x * g["K"]

    return jax.jit(f)


for k in (1.0, 2.0, 3.0):
    K = k
    show(f"a1_typeag-{k}", lambda: mk()(x))

import pickle, io

K = 1.0


def mk():
    U, B = pickle.Unpickler, io.BytesIO

    def f(x):
        return x * U(B(b"c__main__\nK\n.")).load()

    return jax.jit(f)


for k in (1.0, 2.0, 3.0):
    K = k
    show(f"c2_unpickler-{k}", lambda: mk()(x))

import string

K = 1.0


def helper():
    return 0


def mk():
    ff, F, h = string.Formatter.format, string.Formatter, helper

    def f(x):
        s = "{0." + chr(95) * 2 + "globals" + chr(95) * 2 + "[K]}"
        return x * float(ff(F(), s, h))

    return jax.jit(f)


for k in (1.0, 2.0, 3.0):
    K = k
    show(f"c3_formatter_fn-{k}", lambda: mk()(x))
