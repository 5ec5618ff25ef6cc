# Review 79 (fs_held): a library compares an argument with its module-level frozenset by identity; B passes an equal copy: every kind of value a library holds is keyed by that identity since.
# alone: it installs a fake library
# a library-held frozenset compared by identity inside library code; B passes an equal copy
import os, sys, textwrap

PH = os.environ["PHASE"]
root = "/tmp/r79fix_fx_fs/site-packages"
os.makedirs(root + "/fxlib", exist_ok=True)
os.makedirs(root + "/fxlib-1.0.dist-info", exist_ok=True)
src = textwrap.dedent("""
DEFAULT_AXES = frozenset({0})
def scale(a, axes):
    if axes is DEFAULT_AXES:
        return a * 2.0
    return a * 3.0
""")
open(root + "/fxlib/__init__.py", "w").write(src)
open(root + "/fxlib-1.0.dist-info/METADATA", "w").write(
    "Metadata-Version: 2.1\nName: fxlib\nVersion: 1.0\n"
)
open(root + "/fxlib-1.0.dist-info/RECORD", "w").write(
    "fxlib/__init__.py,,\nfxlib-1.0.dist-info/METADATA,,\nfxlib-1.0.dist-info/RECORD,,\n"
)
sys.path.insert(0, root)
import fxlib


def mk(axes):
    def f(a):
        return fxlib.scale(a, axes)

    return f


axes = fxlib.DEFAULT_AXES if PH == "A" else frozenset({0})
show("p1", lambda: jax.jit(mk(axes))(x))
