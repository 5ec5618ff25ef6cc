# Review 76 (deepsub): hasattr of a sub-package two levels below a library module held as a value, imported in A only: every loaded submodule of a module held as a value is keyed since.
# alone: it installs a fake library
# a library module held as a value; hasattr two submodule levels down (a sub-sub-package
# imported in A only): module_names keys the module's and its direct submodules' names only
import os, sys, shutil

P = os.environ["PHASE"]
D = "/tmp/r76fix_deepsub/site-packages"
shutil.rmtree(D, ignore_errors=True)
for d in ("fakelib/a/b", "fakelib-1.0.dist-info"):
    os.makedirs(D + "/" + d)
files = {
    "fakelib/__init__.py": "from . import a\n",
    "fakelib/a/__init__.py": "from . import b\n",
    "fakelib/a/b/__init__.py": "",
    "fakelib/a/b/c.py": "X = 1\n",
    "fakelib-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: fakelib\nVersion: 1.0\n",
}
for n, s in files.items():
    open(D + "/" + n, "w").write(s)
open(D + "/fakelib-1.0.dist-info/RECORD", "w").write(
    "".join(n + ",,\n" for n in files) + "fakelib-1.0.dist-info/RECORD,,\n"
)
sys.path.insert(0, D)
import fakelib

if P == "A":
    import fakelib.a.b.c


def f(a, m=fakelib):
    return a * (2.0 if hasattr(m.a.b, "c") else 3.0)


show("p1", lambda: jax.jit(f)(x))
