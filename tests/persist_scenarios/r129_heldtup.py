# Review 129 (heldtup): one string in two places of an output tree's auxiliary data, once inside a tuple a library holds by name (decoded as that tuple) and once alone (decoded as a new string)
# alone: it installs a fake library that registers a pytree class
# served: its other programs, stored right (what is refused now is never stored)
import os, sys, textwrap

PH = os.environ["PHASE"]
root = "/tmp/r129ht_fx/site-packages"
os.makedirs(root + "/htlib", exist_ok=True)
src = textwrap.dedent("""
import jax

ORDER = ("mean field", "full rank")

class Node:
    def __init__(self, v, aux):
        self.v = v
        self.aux = aux

jax.tree_util.register_pytree_node(Node, lambda n: ((n.v,), n.aux), lambda aux, ch: Node(ch[0], aux))

def make(a, i):
    return Node(a * 2.0, (ORDER, ORDER[i]))

def kind(n):  # the library tests which entry of its own tuple the node carries
    return [n.aux[1] is k for k in n.aux[0]]
""")
open(root + "/htlib/__init__.py", "w").write(src)
d = root + "/htlib-1.0.dist-info"
os.makedirs(d, exist_ok=True)
open(d + "/METADATA", "w").write("Metadata-Version: 2.1\nName: htlib\nVersion: 1.0\n")
open(d + "/RECORD", "w").write(
    "htlib/__init__.py,,\nhtlib-1.0.dist-info/METADATA,,\nhtlib-1.0.dist-info/RECORD,,\n"
)
sys.path.insert(0, root)
import htlib


def mk():
    def f(a):
        return htlib.make(a, 1)

    return f


def obs():
    out = jax.jit(mk())(x)
    return jnp.array(htlib.kind(out) + [out.aux[0] is htlib.ORDER])


show("h1", obs)
