# Review 131: dict keys of an output tree: an interned literal key, and one run-time key object in two dicts
# served: its programs with dict keys, stored with their key table (review 131)
import os

LOSS = "loss"  # interned literal (identifier)


def mk():
    def f(a):
        k = "mean " + str(a.ndim)  # made while tracing, not interned
        return ({LOSS: a * 2.0, k: a}, {k: a * 3.0})

    return f


def chk(o):
    ks0, ks1 = list(o[0]), list(o[1])
    return jnp.array([ks0[0] is LOSS, ks0[1] is ks1[0], ks0[0] == LOSS])


show("d1", lambda: chk(jax.jit(mk())(x)))
show("d2", lambda: chk(jax.jit(lambda a: mk()(a))(x)))
