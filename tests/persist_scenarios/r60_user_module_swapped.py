# Review 60 (usercode_memo_swap): B replaces sys.modules["helper_r60"] by a module of another file after earlier calls (the same count of modules); an installed library imports it while traced. The user-code digest is memoized by which modules are loaded since, not by their count.
# alone: the user modules differ between A and B for every later call
import importlib.util
import os
import sys
import tempfile

root = os.path.join(tempfile.gettempdir(), "pcache-r60-swap", os.environ["PHASE"])
sp, usr = os.path.join(root, "site-packages"), os.path.join(root, "usr")
for d in (os.path.join(sp, "fakelib_r60s"), os.path.join(sp, "fakelib_r60s-1.0.dist-info"), usr):
    os.makedirs(d, exist_ok=True)
with open(os.path.join(sp, "fakelib_r60s", "__init__.py"), "w") as fh:
    fh.write("def apply(x):\n    import helper_r60\n    return helper_r60.scale(x)\n")
info = os.path.join(sp, "fakelib_r60s-1.0.dist-info")
with open(os.path.join(info, "METADATA"), "w") as fh:
    fh.write("Metadata-Version: 2.1\nName: fakelib_r60s\nVersion: 1.0\n")
with open(os.path.join(info, "RECORD"), "w") as fh:
    fh.write(
        "fakelib_r60s/__init__.py,,\nfakelib_r60s-1.0.dist-info/METADATA,,\nfakelib_r60s-1.0.dist-info/RECORD,,\n"
    )
with open(os.path.join(usr, "helper_r60.py"), "w") as fh:
    fh.write("def scale(x):\n    return x * 2.0\n")
with open(os.path.join(usr, "helper_r60_alt.py"), "w") as fh:
    fh.write("def scale(x):\n    return x * 3.0\n")
sys.path[:0] = [usr, sp]
import fakelib_r60s  # noqa: E402
import helper_r60  # noqa: E402, F401

k = 1.0 if os.environ["PHASE"] == "A" else 2.0
jax.jit(lambda a: a + k)(x)  # (keys made at this set of modules; traced in both)
if os.environ["PHASE"] == "B":  # the same count of modules, another file under the name
    spec = importlib.util.spec_from_file_location(
        "helper_r60", os.path.join(usr, "helper_r60_alt.py")
    )
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    sys.modules["helper_r60"] = m


def f(a):
    return fakelib_r60s.apply(a)


show("p1", lambda: jax.jit(f)(x))
