# Review 130 (ntheld): an item of a library-held NamedTuple / attribute of a library-held instance, also in the output tree's auxiliary data by value
# alone: it installs a fake library that registers a pytree class
# served: its other programs, stored right (what is refused now is never stored)
import os, sys, textwrap

PH = os.environ["PHASE"]
root = "/tmp/r130nt_fx/site-packages"
os.makedirs(root + "/ntlib", exist_ok=True)
src = textwrap.dedent("""
import jax
from typing import NamedTuple

class Cfg(NamedTuple):
    name: str
    n: int

class Box:
    def __init__(self, label):
        self.label = label

CFG = Cfg("mean field", 1000)
BOX = Box("full rank")

class Node:
    def __init__(self, v, aux):
        self.v = v
        self.aux = aux

jax.tree_util.register_pytree_node(Node, lambda n: ((n.v,), n.aux), lambda aux, ch: Node(ch[0], aux))

def make_nt(a):
    return Node(a * 2.0, (CFG, CFG.name))

def make_box(a):
    return Node(a * 3.0, (BOX, BOX.label))

def check_nt(n):
    return [n.aux[1] is n.aux[0].name, n.aux[0] is CFG]

def check_box(n):
    return [n.aux[1] is n.aux[0].label, n.aux[0] is BOX]
""")
open(root + "/ntlib/__init__.py", "w").write(src)
d = root + "/ntlib-1.0.dist-info"
os.makedirs(d, exist_ok=True)
open(d + "/METADATA", "w").write("Metadata-Version: 2.1\nName: ntlib\nVersion: 1.0\n")
open(d + "/RECORD", "w").write(
    "ntlib/__init__.py,,\nntlib-1.0.dist-info/METADATA,,\nntlib-1.0.dist-info/RECORD,,\n"
)
sys.path.insert(0, root)
import ntlib


def mk1():
    def f(a):
        return ntlib.make_nt(a)

    return f


def mk2():
    def f(a):
        return ntlib.make_box(a)

    return f


show("n1", lambda: jnp.array(ntlib.check_nt(jax.jit(mk1())(x))))
show("b1", lambda: jnp.array(ntlib.check_box(jax.jit(mk2())(x))))
