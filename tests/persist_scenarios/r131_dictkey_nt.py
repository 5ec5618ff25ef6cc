# Review 131: dict keys in an output tree stored as JSON nodes (a stdlib NamedTuple node forces it)
# served: its programs with dict keys, stored with their key table (review 131)
import os, difflib

LOSS = "loss"


def mk():
    def f(a):
        k = "mean " + str(a.ndim)
        return difflib.Match({LOSS: a * 2.0, k: a}, {k: a * 3.0}, a)

    return f


def chk(o):
    ks0, ks1 = list(o[0]), list(o[1])
    return jnp.array([type(o) is difflib.Match, ks0[0] is LOSS, ks0[1] is ks1[0], ks0[0] == LOSS])


show("n1", lambda: chk(jax.jit(mk())(x)))
