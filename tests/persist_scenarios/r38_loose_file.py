# Review 38 (sitepk): a loose file under site-packages inside a package a distribution
# provides (its RECORD does not list the file) was taken as that distribution's code,
# whose version alone was keyed; a library module is attributed by its file since.
# alone: the package then holds a loose module, which refuses every later call (review 56)
import os
import sys
import tempfile

_d = os.path.join(tempfile.mkdtemp(), "site-packages")
os.makedirs(os.path.join(_d, "fkdist"))
os.makedirs(os.path.join(_d, "fkdist-1.0.dist-info"))
with open(os.path.join(_d, "fkdist", "__init__.py"), "w") as fh:
    fh.write("")
with open(os.path.join(_d, "fkdist", "loose.py"), "w") as fh:
    fh.write(
        "K = %s\ndef scale(a):\n    return a * K\n"
        % ("2.0" if os.environ.get("PHASE") == "A" else "3.0")
    )
with open(os.path.join(_d, "fkdist-1.0.dist-info", "METADATA"), "w") as fh:
    fh.write("Metadata-Version: 2.1\nName: fkdist\nVersion: 1.0\n")
with open(os.path.join(_d, "fkdist-1.0.dist-info", "RECORD"), "w") as fh:
    fh.write("fkdist/__init__.py,,\n")
with open(os.path.join(_d, "fkdist-1.0.dist-info", "top_level.txt"), "w") as fh:
    fh.write("fkdist\n")
sys.path.insert(0, _d)
import fkdist.loose  # noqa: E402


def f(a):
    return fkdist.loose.scale(a)


show("loose", lambda: jax.jit(f)(x))
