# Instances of library classes the program made (issue 27, phase 3: numpyro's NUTS
# and MCMC are such): keyed by class and attributes across processes, nested ones
# and shared references included. A and B differ in one encoder's indent and one
# template nested in another instance (traced again); equal ones are served.  # served
import json
import os
import string

import jax

show = globals()["show"]
x = globals()["x"]
B = os.environ["PHASE"] == "B"

ENC = json.JSONEncoder(indent=2 if B else None)
SAME = json.JSONEncoder(sort_keys=True)
TPL = string.Template("$a + $b")
NESTED = json.JSONEncoder(default=None)
NESTED.template = string.Template("$a" if B else "$a + $b")
PAIR = (TPL, TPL)


def by_encoder(v):
    return v * (3.0 if ENC.indent else 2.0)


def by_nested(v):
    return v + len(NESTED.template.template)


def by_same(v):
    return v * (5.0 if SAME.sort_keys else 4.0) + len(PAIR[0].template) + len(PAIR[1].template)


show("encoder", lambda: jax.jit(by_encoder)(x))
show("nested", lambda: jax.jit(by_nested)(x))
show("same", lambda: jax.jit(by_same)(x))
