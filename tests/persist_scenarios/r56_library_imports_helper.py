# Review 56 (libhelper): an installed library imports a loose module of its site-packages (no RECORD lists it), different in A and B: a library module holding a user module, function or class, or an unlisted one, is not persisted since.
# alone: what the library holds refuses every later call
import os
import shutil
import sys
import tempfile

base = os.path.join(tempfile.gettempdir(), "pcache-r56-libhelper")
root = os.path.join(base, "site-packages")
shutil.rmtree(base, ignore_errors=True)
os.makedirs(os.path.join(root, "fakelib_r56"))
info = os.path.join(root, "fakelib_r56-1.0.dist-info")
os.makedirs(info)
with open(os.path.join(root, "fakelib_r56", "__init__.py"), "w") as fh:
    fh.write("import fakehelper_r56\n\n\ndef scale(a):\n    return a * fakehelper_r56.K\n")
with open(os.path.join(info, "METADATA"), "w") as fh:
    fh.write("Metadata-Version: 2.1\nName: fakelib_r56\nVersion: 1.0\n")
with open(os.path.join(info, "RECORD"), "w") as fh:
    fh.write("fakelib_r56/__init__.py,,\n")
helper = root if "helper" == "helper" else os.path.join(base, "user")
os.makedirs(helper, exist_ok=True)
with open(os.path.join(helper, "fakehelper_r56.py"), "w") as fh:
    fh.write("K = %s\n" % ("2.0" if os.environ["PHASE"] == "A" else "3.0"))
sys.path[0:0] = [helper, root] if helper != root else [root]
import fakelib_r56  # noqa: E402


def f(a):
    return fakelib_r56.scale(a)


show("p1", lambda: jax.jit(f)(x))
