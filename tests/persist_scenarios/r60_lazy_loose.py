# Review 60 (lib_lazy_loose): an installed library imports, inside a function, a loose module of its site directory (no RECORD lists it) whose source differs between A and B. A loaded module of a site directory no distribution installed persists nothing since.
# alone: a loose module is loaded for every later call
import os
import sys
import tempfile

sp = os.path.join(tempfile.gettempdir(), "pcache-r60-loose", os.environ["PHASE"], "site-packages")
os.makedirs(os.path.join(sp, "fakelib_r60"), exist_ok=True)
os.makedirs(os.path.join(sp, "fakelib_r60-1.0.dist-info"), exist_ok=True)
with open(os.path.join(sp, "fakelib_r60", "__init__.py"), "w") as fh:
    fh.write("def apply(x):\n    import loose_r60\n    return loose_r60.scale(x)\n")
info = os.path.join(sp, "fakelib_r60-1.0.dist-info")
with open(os.path.join(info, "METADATA"), "w") as fh:
    fh.write("Metadata-Version: 2.1\nName: fakelib_r60\nVersion: 1.0\n")
with open(os.path.join(info, "RECORD"), "w") as fh:
    fh.write(
        "fakelib_r60/__init__.py,,\nfakelib_r60-1.0.dist-info/METADATA,,\nfakelib_r60-1.0.dist-info/RECORD,,\n"
    )
with open(os.path.join(sp, "loose_r60.py"), "w") as fh:
    fh.write(f"def scale(x):\n    return x * {2.0 if os.environ['PHASE'] == 'A' else 3.0}\n")
sys.path[:0] = [sp]
import fakelib_r60  # noqa: E402


def f(a):
    return fakelib_r60.apply(a)


show("p1", lambda: jax.jit(f)(x))
