# Review 56 (import_twover): fakelib 1.0 and 2.0 both on sys.path, in another order in A and B, imported inside the traced function: the import names the module's distribution since.
# alone: sys.path differs between A and B
import os
import shutil
import sys
import tempfile

base = os.path.join(tempfile.gettempdir(), "pcache-r56-twover")
shutil.rmtree(base, ignore_errors=True)
dirs = []
for ver, k in (("1.0", "2.0"), ("2.0", "3.0")):
    root = os.path.join(base, "v" + ver, "site-packages")
    os.makedirs(os.path.join(root, "fakelib_r56"))
    info = os.path.join(root, f"fakelib_r56-{ver}.dist-info")
    os.makedirs(info)
    with open(os.path.join(root, "fakelib_r56", "__init__.py"), "w") as fh:
        fh.write(f"K = {k}\n")
    with open(os.path.join(info, "METADATA"), "w") as fh:
        fh.write(f"Metadata-Version: 2.1\nName: fakelib_r56\nVersion: {ver}\n")
    with open(os.path.join(info, "RECORD"), "w") as fh:
        fh.write("fakelib_r56/__init__.py,,\n")
    dirs.append(root)
sys.path[0:0] = dirs if os.environ["PHASE"] == "A" else dirs[::-1]
import fakelib_r56  # noqa: E402,F401


def f(a):
    import fakelib_r56  # noqa: F811

    return a * fakelib_r56.K


show("p1", lambda: jax.jit(f)(x))
