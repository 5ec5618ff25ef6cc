# Review 76 (strident): a library compares an argument with its own string constant by identity; the user's equal string is the library's object in A and a fresh one in B: a value a library module holds is keyed by its name since.
# alone: it installs a fake library
# a library compares an argument with its own string constant by identity; the user's
# equal string is the library's object in A and a fresh one in B
import os, sys, shutil

P = os.environ["PHASE"]
D = "/tmp/r76fix_strident/site-packages"
shutil.rmtree(D, ignore_errors=True)
os.makedirs(D + "/fakelib")
os.makedirs(D + "/fakelib-1.0.dist-info")
open(D + "/fakelib/__init__.py", "w").write(
    "FAST = 'fast mode!'\ndef apply(x, mode):\n    return x * 2.0 if mode is FAST else x * 3.0\n"
)
open(D + "/fakelib-1.0.dist-info/METADATA", "w").write(
    "Metadata-Version: 2.1\nName: fakelib\nVersion: 1.0\n"
)
open(D + "/fakelib-1.0.dist-info/RECORD", "w").write(
    "fakelib/__init__.py,,\nfakelib-1.0.dist-info/METADATA,,\nfakelib-1.0.dist-info/RECORD,,\n"
)
sys.path.insert(0, D)
import fakelib

MODE = fakelib.FAST if P == "A" else "".join(["fast", " mode!"])


def f(a):
    return fakelib.apply(a, MODE)


show("p1", lambda: jax.jit(f)(x))
