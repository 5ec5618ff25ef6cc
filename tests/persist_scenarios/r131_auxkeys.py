# Review 131: a run-time string as a dict key (output tree, a PyTreeDef in aux data) and by value in aux data
# served: its programs with dict keys, stored with their key table (review 131)
# alone: it installs a fake library that registers a pytree class
import os, sys, textwrap

root = "/tmp/r131ak_fx/site-packages"
os.makedirs(root + "/aklib", exist_ok=True)
src = textwrap.dedent("""
import jax

class Node:
    def __init__(self, v, aux):
        self.v = v
        self.aux = aux

jax.tree_util.register_pytree_node(Node, lambda n: ((n.v,), n.aux), lambda aux, ch: Node(ch[0], aux))

def key(a):
    return "mode " + str(a.ndim)  # made while tracing

def out_dict(a):
    k = key(a)
    return ({k: a * 2.0}, Node(a * 3.0, k))

def check_out_dict(o):
    return [list(o[0])[0] is o[1].aux, o[1].aux == "mode 1"]

def aux_treedef(a):
    k = key(a)
    return Node(a * 2.0, (jax.tree.structure({k: 0, "loss": 1}), k))

def check_aux_treedef(n):
    d = n.aux[0].unflatten([0, 1])
    ks = list(d)
    return [ks[1] is n.aux[1], ks[0] is "loss", ks[0] == "loss"]

def aux_fs(a):
    k = key(a)
    return Node(a * 2.0, (frozenset({k}), k))

def check_aux_fs(n):
    return [next(iter(n.aux[0])) is n.aux[1]]

def aux_two_nodes(a):
    k = key(a)
    return (Node(a * 2.0, k), Node(a * 3.0, (k,)))

def check_two(o):
    return [o[0].aux is o[1].aux[0]]
""")
open(root + "/aklib/__init__.py", "w").write(src)
d = root + "/aklib-1.0.dist-info"
os.makedirs(d, exist_ok=True)
open(d + "/METADATA", "w").write("Metadata-Version: 2.1\nName: aklib\nVersion: 1.0\n")
open(d + "/RECORD", "w").write(
    "aklib/__init__.py,,\naklib-1.0.dist-info/METADATA,,\naklib-1.0.dist-info/RECORD,,\n"
)
sys.path.insert(0, root)
import aklib


def mk(fn):
    def f(a):
        return fn(a)

    return f


show("od", lambda: jnp.array(aklib.check_out_dict(jax.jit(mk(aklib.out_dict))(x))))
show("td", lambda: jnp.array(aklib.check_aux_treedef(jax.jit(mk(aklib.aux_treedef))(x))))
show("fs", lambda: jnp.array(aklib.check_aux_fs(jax.jit(mk(aklib.aux_fs))(x))))
show("tw", lambda: jnp.array(aklib.check_two(jax.jit(mk(aklib.aux_two_nodes))(x))))
