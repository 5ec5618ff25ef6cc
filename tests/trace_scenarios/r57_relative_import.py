# Review 57 (relimp): a relative import inside a user package's function was guarded as the absolute module of that name (the standard library's math): relative imports are never reused since.
import os, sys, tempfile

root = tempfile.mkdtemp()
os.makedirs(os.path.join(root, "relpkg_r57"))
open(os.path.join(root, "relpkg_r57", "__init__.py"), "w").close()
with open(os.path.join(root, "relpkg_r57", "math.py"), "w") as fh:
    fh.write("pi = 2.0\n")
with open(os.path.join(root, "relpkg_r57", "core.py"), "w") as fh:
    fh.write("def f(a):\n    from .math import pi\n    return a * pi\n")
sys.path.insert(0, root)
import relpkg_r57.core, relpkg_r57.math

mk = lambda: jax.jit(lambda a: relpkg_r57.core.f(a))
show("s1", lambda: mk()(x))
show("s1b", lambda: mk()(x))
relpkg_r57.math.pi = 5.0
show("s2", lambda: mk()(x))
