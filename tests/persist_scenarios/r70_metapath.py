# Review 70 (metapath): B installs a user import hook (sys.meta_path finder) that serves its own code for an: refused since.
# alone: it leaves process state (a user module, an import hook, a breakpoint hook) every later key refuses or differs by
# installed module an installed library imports lazily while traced (A loaded the real one first)
import os, sys, shutil, importlib.abc, importlib.util

PH = os.environ["PHASE"]
R = "/tmp/r70fix_mp"
sp = os.path.join(R, "site-packages")
shutil.rmtree(R, ignore_errors=True)
os.makedirs(os.path.join(sp, "fakelib"), exist_ok=True)
os.makedirs(os.path.join(sp, "nsp"), exist_ok=True)
open(os.path.join(sp, "fakelib", "__init__.py"), "w").write(
    "def apply(a):\n    import nsp.impl\n    return nsp.impl.g(a)\n"
)
open(os.path.join(sp, "nsp", "impl.py"), "w").write("def g(a):\n    return a * 2.0\n")


def dist(name, files):
    di = os.path.join(sp, f"{name}-1.0.dist-info")
    os.makedirs(di, exist_ok=True)
    open(os.path.join(di, "METADATA"), "w").write(
        f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n"
    )
    open(os.path.join(di, "RECORD"), "w").write(
        "".join(
            f"{f},,\n"
            for f in files + [f"{name}-1.0.dist-info/METADATA", f"{name}-1.0.dist-info/RECORD"]
        )
    )


dist("fakelib", ["fakelib/__init__.py"])
dist("nspdist", ["nsp/impl.py"])


class Hook(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path, target=None):
        return importlib.util.spec_from_loader(name, self) if name == "nsp.impl" else None

    def create_module(self, spec):
        return None

    def exec_module(self, m):
        m.g = lambda a: a * 3.0


sys.path[:0] = [sp]
import fakelib

if PH == "A":
    import nsp.impl
else:
    sys.meta_path.insert(0, Hook())


def f(a):
    return fakelib.apply(a)


show("mp", lambda: jax.jit(f)(x))
