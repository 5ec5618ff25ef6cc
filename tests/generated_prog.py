"""A program over a pytree node whose flatten and unflatten a library generates with
``exec`` (as equinox does), for tests/test_generated.py. The library is a fake
distribution the test writes into a site directory (argv[1]); argv[2] names the
case. Prints one JSON line: the results' bytes and pcache's stats."""

import dataclasses
import functools
import json
import sys

sys.path.insert(0, sys.argv[1])

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from equinox._module import _flatten as gen  # noqa: E402  (the fake)

case = sys.argv[2]


@dataclasses.dataclass
class Node:
    a: object
    scale: float = dataclasses.field(metadata={"static": True})


flat, _, unflat = gen.generate_flatten_functions(Node, dataclasses.fields(Node))
if case == "forged":  # user code under the generator's file name, not what it makes
    src = "def flatten(obj):\n    get = obj.__dict__.get\n    return ((get('a', MISSING),), (MISSING, 3.0))\n"
    ns = dict(flat.__globals__)
    exec(compile(src, "<generated_flatten_Node>", "exec"), ns)
    flat = ns["flatten"]
jax.tree_util.register_pytree_node(Node, flat, functools.partial(unflat, Node))
if case == "rebound":  # a name the code loads rebound after the proof would be made
    flat.__globals__["MISSING"] = None

out = []
x = jnp.arange(3.0)
if case == "module":  # a Module (equinox's in miniature) captured by the callable
    from equinox._module._module import Module

    @dataclasses.dataclass
    class Cfg(Module):
        k: float

    for k in (2.0, 2.0, 3.0):
        cfg = Cfg(k)
        out.append(np.asarray(jax.jit(lambda a, c=cfg: a * c.k)(x)).tobytes().hex())
if case == "unset":  # a defaulted field set in one instance, left to the class in another
    from equinox._module._module import Module

    @dataclasses.dataclass(init=False)
    class Opt(Module):
        a: float
        b: float = 1.0

        def __init__(self, a, setb):
            self.a = a
            if setb:
                self.b = 1.0

    fo, _, uo = gen.generate_flatten_functions(Opt, dataclasses.fields(Opt))
    jax.tree_util.register_pytree_node(Opt, fo, functools.partial(uo, Opt))
    for setb in (True, False):
        m = Opt(2.0, setb)
        f = jax.jit(lambda a, m=m: a * len(jax.tree_util.tree_leaves(m)))
        out.append(np.asarray(f(x)).tobytes().hex())
for step in range(3 if case not in ("module", "unset") else 0):
    if case == "late" and step == 1:  # rebound after the proof was made
        flat.__globals__["MISSING"] = None
    node = Node(x + step, 2.0)
    out.append(np.asarray(jax.jit(lambda n: n.a * n.scale)(node)).tobytes().hex())
stats = {}
if "pcache" in sys.modules:
    import pcache

    stats = pcache.stats()
print(
    json.dumps(
        {"out": out, "hits": stats.get("trace_hits"), "why": stats.get("trace_miss_reasons")}
    )
)
