# A memo keyed by its arguments' ids (numpyro's MCMC._cache is one): the ints are
# new in every process, the objects they identify are walked by content, so an equal
# memo is served. A memo whose ids name other objects in B (the same ints' roles
# swapped), or an int that names no walked object, traces again.  # served
import functools
import json
import os

import jax
import numpy as np

show = globals()["show"]
x = globals()["x"]
B = os.environ["PHASE"] == "B"


def body(v, scale):
    return v * scale


def Sampler(args):
    # (an instance of a library class the program made, as numpyro's MCMC is: a
    # user class's instance is no persisted trace's, for other reasons)
    s = json.JSONEncoder()
    s.args, s._cache = args, {}
    return s


def memo(s):  # (untraced, as numpyro fills its memo: traced code calling id() is refused)
    s.key = tuple(id(a) for a in s.args)
    s._cache[s.key] = functools.partial(body, scale=len(s._cache) + 2.0)


def fns(s):
    return s._cache.get(s.key, functools.partial(body, scale=1.0))


D1, D2 = np.arange(3.0), np.ones(2)
SAME = Sampler((D1, D2))
memo(SAME)
# A: the memo maps (D1, D2) to scale 2 and (D2, D1) to scale 3; B: the other way
SWAP = Sampler((D2, D1) if B else (D1, D2))
memo(SWAP)
SWAP.args = SWAP.args[::-1]
memo(SWAP)
SWAP.args = (D1, D2)
SWAP.key = (id(D1), id(D2))
KEPT = np.zeros(1)  # (alive: its id is no other array's)
GONE = Sampler((KEPT,))
memo(GONE)
GONE.args = (np.zeros(2),)  # (its memo's key names an array no walk meets)
GONE.key = (id(GONE.args[0]),)


def run(s):
    return lambda v: fns(s)(v) + s.args[0].sum()


show("same", lambda: jax.jit(run(SAME))(x))
show("swap", lambda: jax.jit(run(SWAP))(x))
show("gone", lambda: jax.jit(run(GONE))(x))
