# Review 79 (held_kinds): as fs_held, with a NamedTuple, a frozen dataclass, a dict, a list and a numpy scalar a library module holds.
# alone: it installs a fake library
# library-held immutable/mutable values of other kinds compared by identity in library code
import os, sys, textwrap

PH = os.environ["PHASE"]
root = "/tmp/r79fix_fx_hk/site-packages"
os.makedirs(root + "/hklib", exist_ok=True)
os.makedirs(root + "/hklib-1.0.dist-info", exist_ok=True)
src = textwrap.dedent("""
import dataclasses, typing
import numpy as np
class DN(typing.NamedTuple):
    a: int
    b: int
@dataclasses.dataclass(frozen=True)
class Cfg:
    k: int = 1
D_NT = DN(1, 2)
D_DC = Cfg(1)
D_DICT = {"k": 1}
D_LIST = [1, 2]
D_NP = np.float64(1.5)
D_CX = 1.5 + 2j
D_RANGE = range(7)
def pick(a, v, d):
    return a * 2.0 if v is d else a * 3.0
def nt(a, v): return pick(a, v, D_NT)
def dc(a, v): return pick(a, v, D_DC)
def dd(a, v): return pick(a, v, D_DICT)
def dl(a, v): return pick(a, v, D_LIST)
def dn(a, v): return pick(a, v, D_NP)
def cx(a, v): return pick(a, v, D_CX)
def rg(a, v): return pick(a, v, D_RANGE)
""")
open(root + "/hklib/__init__.py", "w").write(src)
open(root + "/hklib-1.0.dist-info/METADATA", "w").write(
    "Metadata-Version: 2.1\nName: hklib\nVersion: 1.0\n"
)
open(root + "/hklib-1.0.dist-info/RECORD", "w").write(
    "hklib/__init__.py,,\nhklib-1.0.dist-info/METADATA,,\nhklib-1.0.dist-info/RECORD,,\n"
)
sys.path.insert(0, root)
import hklib


def mk(fn, v):
    def f(a):
        return fn(a, v)

    return f


A = PH == "A"
cases = {
    "nt": (hklib.nt, hklib.D_NT if A else hklib.DN(1, 2)),
    "dc": (hklib.dc, hklib.D_DC if A else hklib.Cfg(1)),
    "dd": (hklib.dd, hklib.D_DICT if A else {"k": 1}),
    "dl": (hklib.dl, hklib.D_LIST if A else [1, 2]),
    "dn": (hklib.dn, hklib.D_NP if A else np.float64(1.5)),
    "cx": (hklib.cx, hklib.D_CX if A else complex(1.5, 2.0)),
    "rg": (hklib.rg, hklib.D_RANGE if A else range(7)),
}
for tag, (fn, v) in cases.items():
    show(tag, lambda: jax.jit(mk(fn, v))(x))
