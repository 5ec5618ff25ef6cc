# Review 58 (lazy_import): an installed library imports a user module inside a function, while traced: the key is computed again after the trace, with that module's code, since.
# alone: the user modules differ between A and B for every later call
import os
import shutil
import sys
import tempfile

base = os.path.join(tempfile.gettempdir(), "pcache-r58-lazy")
shutil.rmtree(base, ignore_errors=True)
site, user = os.path.join(base, "site-packages"), os.path.join(base, "user")
os.makedirs(os.path.join(site, "fakelib_r58"))
os.makedirs(os.path.join(site, "fakelib_r58-1.0.dist-info"))
os.makedirs(user)
with open(os.path.join(site, "fakelib_r58", "__init__.py"), "w") as fh:
    fh.write("def apply(a):\n    import helper_r58\n\n    return helper_r58.scale(a)\n")
with open(os.path.join(site, "fakelib_r58-1.0.dist-info", "METADATA"), "w") as fh:
    fh.write("Metadata-Version: 2.1\nName: fakelib_r58\nVersion: 1.0\n")
with open(os.path.join(site, "fakelib_r58-1.0.dist-info", "RECORD"), "w") as fh:
    fh.write("fakelib_r58/__init__.py,,\n")
with open(os.path.join(user, "helper_r58.py"), "w") as fh:
    fh.write(
        "def scale(a):\n    return a * %s\n" % ("2.0" if os.environ["PHASE"] == "A" else "3.0")
    )
sys.path[0:0] = [user, site]
import fakelib_r58  # noqa: E402


def f(a):
    return fakelib_r58.apply(a)


show("p1", lambda: jax.jit(f)(x))
