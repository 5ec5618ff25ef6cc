# Review 116 (x_od_hidden): an OrderedDict item set by dict.__setitem__ is in the dict
# (od[k] reads it) but not in the OrderedDict's own order, which alone was keyed: A's
# value served to B. Now such an OrderedDict refuses reuse.  # served
import collections
import os

import jax

show = globals()["show"]
x = globals()["x"]
B = os.environ["PHASE"] == "B"

OD = collections.OrderedDict(a=1.0)
dict.__setitem__(OD, "k", 3.0 if B else 2.0)
SAME = collections.OrderedDict(a=1.0)


def by_hidden(v):
    return v * OD["k"]


def canary(v):
    return v * SAME["a"] + 1.0


show("hidden", lambda: jax.jit(by_hidden)(x))
show("canary", lambda: jax.jit(canary)(x))
