# Review 25 (class D): a library module held as a value (a closure cell, a default, a global handed to a local) whose attribute is a reflective module: dataclasses.inspect, multiprocessing.reduction's pickle.
# ruff: noqa: F811

import dataclasses

K = 1.0


def helper():
    return 0


def mk():
    dc, h = dataclasses, helper

    def f(x):
        g = dict(dc.inspect.getmembers(h))[chr(95) * 2 + "globals" + chr(95) * 2]
        return x * g["K"]

    return jax.jit(f)


for k in (1.0, 2.0, 3.0):
    K = k
    show(f"closure-{k}", lambda: mk()(x))


def mk():
    def f(x, m=dataclasses):
        g = dict(m.inspect.getmembers(helper))[chr(95) * 2 + "globals" + chr(95) * 2]
        return x * g["K"]

    return jax.jit(f)


for k in (1.0, 2.0, 3.0):
    K = k
    show(f"default-{k}", lambda: mk()(x))


def mk():
    def f(x):
        d = dataclasses
        g = dict(getattr(d, "inspect").getmembers(helper))[chr(95) * 2 + "globals" + chr(95) * 2]
        return x * g["K"]

    return jax.jit(f)


for k in (1.0, 2.0, 3.0):
    K = k
    show(f"local-{k}", lambda: mk()(x))

import multiprocessing

pk = "c__main__\nK\n."


def mk():
    m = multiprocessing

    def f(x):
        return x * m.reduction.pickle.loads(pk.encode())

    return jax.jit(f)


for k in (1.0, 2.0, 3.0):
    K = k
    show(f"pickle-{k}", lambda: mk()(x))
