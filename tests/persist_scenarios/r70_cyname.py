# Review 70 (cyname): a user module named like Cython's runtime (_cython_*) is left out of the persisted key's: refused since.
# alone: it leaves process state (a user module, an import hook, a breakpoint hook) every later key refuses or differs by
# user code; an installed library holds (in a dict) a function of it and runs it while traced
import os, sys, shutil

PH = os.environ["PHASE"]
R = "/tmp/r70fix_cy"
sp = os.path.join(R, "site-packages")
us = os.path.join(R, "user")
shutil.rmtree(R, ignore_errors=True)  # (fresh files each phase: no stale .pyc)
os.makedirs(os.path.join(sp, "fakelib"), exist_ok=True)
os.makedirs(us, exist_ok=True)
open(os.path.join(sp, "fakelib", "__init__.py"), "w").write(
    "REG = {}\n"
    "def register(name, fn):\n    REG[name] = fn\n"
    "def apply(name, a):\n    return REG[name](a)\n"
)
di = os.path.join(sp, "fakelib-1.0.dist-info")
os.makedirs(di, exist_ok=True)
open(os.path.join(di, "METADATA"), "w").write(
    "Metadata-Version: 2.1\nName: fakelib\nVersion: 1.0\n"
)
open(os.path.join(di, "RECORD"), "w").write(
    "fakelib/__init__.py,,\nfakelib-1.0.dist-info/METADATA,,\nfakelib-1.0.dist-info/RECORD,,\n"
)
K = "2.0" if PH == "A" else "3.0"
open(os.path.join(us, "_cython_helper.py"), "w").write(f"K = {K}\ndef g(a):\n    return a * K\n")
sys.path[:0] = [sp, us]
import fakelib, _cython_helper

fakelib.register("g", _cython_helper.g)


def f(a):
    return fakelib.apply("g", a)


show("cy", lambda: jax.jit(f)(x))
