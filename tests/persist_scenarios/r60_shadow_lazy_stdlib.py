# Review 60 (shadow_lazy_stdlib): B only, a user file shadows a standard-library module not loaded yet (stringprep), which str.encode("idna") imports while traced. The program's files named like a library's are in the persisted key since, loaded or not.
# alone: B's sys.path holds the shadow for every later call
import os
import shutil
import sys
import sysconfig
import tempfile

d = os.path.join(tempfile.gettempdir(), "pcache-r60-shadow")
shutil.rmtree(d, ignore_errors=True)
os.makedirs(d)
if os.environ["PHASE"] == "B":
    with open(os.path.join(sysconfig.get_paths()["stdlib"], "stringprep.py")) as fh:
        real = fh.read()
    with open(os.path.join(d, "stringprep.py"), "w") as fh:
        fh.write(real + "\n_b2 = map_table_b2\n\n\ndef map_table_b2(a):\n    return _b2(a) * 2\n")
sys.path.insert(0, d)  # (the same sys.path in A and B)


def f(a):
    return a * len("Bücher.example".encode("idna"))


show("p1", lambda: jax.jit(f)(x))
