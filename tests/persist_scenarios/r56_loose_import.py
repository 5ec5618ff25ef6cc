# Review 56 (loose_import): a loose module under a site-packages directory (no RECORD lists it), imported inside the traced function, different in A and B: an import inside a function is named (attributed) across processes since.
import os
import shutil
import sys
import tempfile

root = os.path.join(tempfile.gettempdir(), "pcache-r56-loose", "site-packages")
shutil.rmtree(root, ignore_errors=True)
os.makedirs(root)
with open(os.path.join(root, "loosemod_r56.py"), "w") as fh:
    fh.write("K = %s\n" % ("2.0" if os.environ["PHASE"] == "A" else "3.0"))
sys.path.insert(0, root)
import loosemod_r56  # noqa: E402,F401


def f(a):
    import loosemod_r56  # noqa: F811

    return a * loosemod_r56.K


show("p1", lambda: jax.jit(f)(x))
sys.path.remove(root)
sys.modules.pop("loosemod_r56")  # (a user module now, A's and B's differ: in every later key)
