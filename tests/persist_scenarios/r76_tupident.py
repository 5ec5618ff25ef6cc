# Review 76 (tupident): as strident, with a library tuple and a big int.
# alone: it installs a fake library
# a library compares arguments with its own tuple and int constants by identity
import os, sys, shutil

P = os.environ["PHASE"]
D = "/tmp/r76fix_tupident/site-packages"
shutil.rmtree(D, ignore_errors=True)
os.makedirs(D + "/fakelib")
os.makedirs(D + "/fakelib-1.0.dist-info")
open(D + "/fakelib/__init__.py", "w").write(
    "AXES = (0, 1)\nBIG = 10 ** 20\n"
    "def apply(x, axes, n):\n    return x * (2.0 if axes is AXES else 3.0) * (5.0 if n is BIG else 7.0)\n"
)
open(D + "/fakelib-1.0.dist-info/METADATA", "w").write(
    "Metadata-Version: 2.1\nName: fakelib\nVersion: 1.0\n"
)
open(D + "/fakelib-1.0.dist-info/RECORD", "w").write(
    "fakelib/__init__.py,,\nfakelib-1.0.dist-info/METADATA,,\nfakelib-1.0.dist-info/RECORD,,\n"
)
sys.path.insert(0, D)
import fakelib

if P == "A":
    ARGS = (fakelib.AXES, fakelib.BIG)
else:
    ARGS = (tuple(range(2)), int("1" + "0" * 20))


def f(a):
    return fakelib.apply(a, ARGS[0], ARGS[1])


show("p1", lambda: jax.jit(f)(x))
