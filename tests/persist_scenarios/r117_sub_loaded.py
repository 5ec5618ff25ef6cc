# Review 117: a library module held as a value (a default) whose attribute is a
# standard-library package (jax._src.compute_on's json); traced code branches on whether a
# submodule of it is loaded (json.tool, imported in B only): its names are keyed, B traces.
import os

import jax
import jax._src.compute_on as CO

show = globals()["show"]
x = globals()["x"]
B = os.environ["PHASE"] == "B"
if B:
    import json.tool  # noqa: F401


def by_hasattr(v, m=CO):
    return v * (2.0 if hasattr(m.json, "tool") else 3.0)


def by_try(v, m=CO):
    try:
        m.json.tool
        k = 2.0
    except AttributeError:
        k = 3.0
    return v * k


show("hasattr", lambda: jax.jit(by_hasattr)(x))
show("try", lambda: jax.jit(by_try)(x))
