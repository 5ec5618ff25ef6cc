# Review 64 (stdshadow_home): a loose file named like a stdlib module (stringprep) in a site directory with a RECORD, first on sys.path; the idna codec imports it. A stdlib-named module under a site directory must be attributed since: it refuses.
# alone: the shadow stays loaded for every later call
import os
import shutil
import sys
import tempfile

site = os.path.join(
    tempfile.gettempdir(), "pcache-r64-shadow", os.environ["PHASE"], "site-packages"
)
shutil.rmtree(site, ignore_errors=True)
os.makedirs(os.path.join(site, "other_r64-1.0.dist-info"))
with open(os.path.join(site, "other_r64.py"), "w") as fh:
    fh.write("X = 1\n")
with open(os.path.join(site, "other_r64-1.0.dist-info", "METADATA"), "w") as fh:
    fh.write("Name: other_r64\nVersion: 1.0\n")
with open(os.path.join(site, "other_r64-1.0.dist-info", "RECORD"), "w") as fh:
    fh.write(
        "other_r64.py,,\nother_r64-1.0.dist-info/METADATA,,\nother_r64-1.0.dist-info/RECORD,,\n"
    )
b2 = "c" if os.environ["PHASE"] == "A" else "c + c"
tables = (
    "a1",
    "b1",
    "c11",
    "c12",
    "c21",
    "c22",
    "c3",
    "c4",
    "c5",
    "c6",
    "c7",
    "c8",
    "c9",
    "d1",
    "d2",
)
fns = "".join(f"def in_table_{t}(c):\n    return False\n" for t in tables)
with open(os.path.join(site, "stringprep.py"), "w") as fh:
    fh.write(
        fns + f"def map_table_b2(c):\n    return {b2}\n\n\ndef map_table_b3(c):\n    return {b2}\n"
    )
real = sys.modules.pop("stringprep", None)  # (another scenario may have loaded the real one)
sys.path.insert(0, site)
"\xe4".encode("idna")


def f(a):
    return a * len("\xe4".encode("idna"))


show("p1", lambda: jax.jit(f)(x))
