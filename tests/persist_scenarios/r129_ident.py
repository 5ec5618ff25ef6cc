# Review 129 (ident): identity within one output tree's auxiliary data (strings, big ints, bytes, tuples, floats, library constants), across processes
# alone: it installs a fake library that registers a pytree class
# served: its other programs, stored right (what is refused now is never stored)
import os, sys, textwrap

PH = os.environ["PHASE"]
root = "/tmp/r129id_fx/site-packages"
os.makedirs(root + "/idlib", exist_ok=True)
src = textwrap.dedent("""
import sys
import jax

FAST = "fast mode!"
SYM = sys.intern("".join(["sym", "_zq"]))
BIG = 10 ** 30
FL = 2.5
TUP = (1.5, "x y")

class Node:
    def __init__(self, v, aux):
        self.v = v
        self.aux = aux

jax.tree_util.register_pytree_node(Node, lambda n: ((n.v,), n.aux), lambda aux, ch: Node(ch[0], aux))

def interned(*p):
    return sys.intern("".join(p))

def make(a, aux):
    return Node(a * 2.0, aux)
""")
open(root + "/idlib/__init__.py", "w").write(src)
d = root + "/idlib-1.0.dist-info"
os.makedirs(d, exist_ok=True)
open(d + "/METADATA", "w").write("Metadata-Version: 2.1\nName: idlib\nVersion: 1.0\n")
open(d + "/RECORD", "w").write(
    "idlib/__init__.py,,\nidlib-1.0.dist-info/METADATA,,\nidlib-1.0.dist-info/RECORD,,\n"
)
sys.path.insert(0, root)
import idlib


def mk(kind):
    def f(a):
        if kind == 0:
            s = "".join(["ab", "cd!"])
            aux = (s, s)
        elif kind == 1:
            s = idlib.interned("ab", "_cd")
            aux = (s, s)
        elif kind == 2:
            aux = (idlib.FAST, idlib.FAST, "".join(["fast", " mode!"]))
        elif kind == 3:
            k = 10**31 + 7
            aux = (k, k)
        elif kind == 4:
            b = bytes([1, 2, 3])
            aux = (b, b)
        elif kind == 5:
            t = (1.5, "p q")
            aux = (t, t)
        elif kind == 6:
            fl = float(a.shape[0]) + 0.25
            aux = (fl, fl)
        elif kind == 7:
            aux = (idlib.SYM, idlib.BIG, idlib.FL, idlib.TUP, idlib.SYM)
        elif kind == 8:
            u = idlib.interned("qq", "_rt_zz")
            aux = (u, idlib.SYM, u)
        elif kind == 9:
            aux = (idlib.TUP, idlib.TUP[1], idlib.TUP)
        return idlib.make(a, aux)

    return f


def obs(kind):
    out = jax.jit(mk(kind))(x)
    a = out.aux
    r = [a[0] is a[1], a[0] is a[-1], len(a)]
    if kind == 2:
        r += [a[0] is idlib.FAST, a[2] is idlib.FAST]
    if kind == 7:
        r += [a[0] is idlib.SYM, a[1] is idlib.BIG, a[2] is idlib.FL, a[3] is idlib.TUP]
    if kind == 9:
        r += [a[0] is idlib.TUP, a[1] is idlib.TUP[1], a[1] is a[0][1], a[2][1] is a[1]]
    return jnp.array(r)


for k in range(10):
    show(f"i{k}", lambda: obs(k))
