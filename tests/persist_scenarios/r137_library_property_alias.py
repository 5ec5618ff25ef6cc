# Review 137: A stores programs over one of two library property objects with one
# getter (numpy's MaskedArray._data and .data), B's hold the other: told apart by
# identity (``==``, a dict, ``in``), so each is keyed as the object the class holds.
import os

import numpy.ma as ma

B = os.environ["PHASE"] == "B"
MA = ma.MaskedArray
pd = MA.__dict__["data"] if B else MA.__dict__["_data"]


def f(v, d=pd):
    return v * (2.0 if d == MA._data else 3.0)


def g(v, d=pd):
    return v * {MA._data: 2.0, MA.data: 5.0}[d]


def h(v, ds=(pd,)):
    return v * float(MA.data in ds)


show("eq", lambda: jax.jit(f)(x))
show("dict", lambda: jax.jit(g)(x))
show("in", lambda: jax.jit(h)(x))
