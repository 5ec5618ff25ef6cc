# Review 64 (loosesite3): a loose module in a site-packages directory with no .dist-info at all, imported by an installed library at its own import and called by it while traced; its content differs in B. Every site-packages/dist-packages entry is a site directory since, so the module must be attributed: it refuses.
# alone: a loose module is loaded for every later call
import os
import shutil
import sys
import tempfile

root = os.path.join(tempfile.gettempdir(), "pcache-r64-loose", os.environ["PHASE"])
shutil.rmtree(root, ignore_errors=True)
site, loose = os.path.join(root, "a", "site-packages"), os.path.join(root, "b", "site-packages")
os.makedirs(os.path.join(site, "reallib_r64-1.0.dist-info"))
os.makedirs(loose)
with open(os.path.join(site, "reallib_r64.py"), "w") as fh:
    fh.write("import loose_r64\n\n\ndef scale(a):\n    return loose_r64.scale(a)\n")
with open(os.path.join(site, "reallib_r64-1.0.dist-info", "METADATA"), "w") as fh:
    fh.write("Name: reallib_r64\nVersion: 1.0\n")
with open(os.path.join(site, "reallib_r64-1.0.dist-info", "RECORD"), "w") as fh:
    fh.write(
        "reallib_r64.py,,\nreallib_r64-1.0.dist-info/METADATA,,\nreallib_r64-1.0.dist-info/RECORD,,\n"
    )
with open(os.path.join(loose, "loose_r64.py"), "w") as fh:
    fh.write(f"def scale(a):\n    return a * {2.0 if os.environ['PHASE'] == 'A' else 5.0}\n")
sys.path[:0] = [site, loose]
import reallib_r64  # noqa: E402


def f(a):
    return reallib_r64.scale(a)


show("p1", lambda: jax.jit(f)(x))
