# Review 130 (cbaux): one run-time string held both by a library callback's cell and by the output tree's auxiliary data
# alone: it installs a fake library that registers a pytree class
# served: its other programs, stored right (what is refused now is never stored)
import os, sys, textwrap

PH = os.environ["PHASE"]
root = "/tmp/r130cb_fx/site-packages"
os.makedirs(root + "/cbalib", exist_ok=True)
src = textwrap.dedent("""
import jax
import numpy as np

LOG = []

class Node:
    def __init__(self, v, aux):
        self.v = v
        self.aux = aux

jax.tree_util.register_pytree_node(Node, lambda n: ((n.v,), n.aux), lambda aux, ch: Node(ch[0], aux))

def make(a, tag):
    name = "mode " + tag  # made while tracing: not interned
    def cb(v):
        LOG.append(name)
        return np.asarray(v) * 2
    y = jax.pure_callback(cb, jax.ShapeDtypeStruct(a.shape, a.dtype), a)
    return Node(y, name)

def same(n):  # the library checks the node it made is the one the callback ran for
    return LOG[-1] is n.aux
""")
open(root + "/cbalib/__init__.py", "w").write(src)
d = root + "/cbalib-1.0.dist-info"
os.makedirs(d, exist_ok=True)
open(d + "/METADATA", "w").write("Metadata-Version: 2.1\nName: cbalib\nVersion: 1.0\n")
open(d + "/RECORD", "w").write(
    "cbalib/__init__.py,,\ncbalib-1.0.dist-info/METADATA,,\ncbalib-1.0.dist-info/RECORD,,\n"
)
sys.path.insert(0, root)
import cbalib


def mk():
    def f(a):
        return cbalib.make(a, "fast")

    return f


def obs():
    out = jax.jit(mk())(x)
    out.v.block_until_ready()
    return jnp.array([cbalib.same(out), LOGLEN() > 0, out.aux == "mode fast"])


LOGLEN = lambda: len(cbalib.LOG)
show("c1", obs)
