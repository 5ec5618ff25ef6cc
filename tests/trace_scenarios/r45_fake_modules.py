# Review 45 (p1_pcdir, p2_pkgpath): a module the program made was taken as library
# code: (1) its __file__ in pcache's own directory (pcache's modules are now only at
# the file their name says); (2) a package the program made, its __path__ pointing at
# a library directory (a package's search locations come from the path finder now).
import importlib.util
import json
import os
import sys
import types

SRC = "class C:\n    def f(x):\n        return x * K\n"


def fake(name, file):
    m = types.ModuleType(name)
    m.__file__ = file
    sys.modules[name] = m
    exec(compile(SRC, "<string>", "exec"), vars(m))
    return m


pkg = types.ModuleType("r45pkg")
pkg.__path__ = [os.path.dirname(json.__file__)]
sys.modules["r45pkg"] = pkg
pcdir = os.path.dirname(importlib.util.find_spec("pcache").origin)
for tag, m in (
    ("pc", fake("r45mod", os.path.join(pcdir, "_r45.py"))),
    ("pkg", fake("r45pkg.decoder", os.path.join(os.path.dirname(json.__file__), "decoder.py"))),
):
    f = m.C.f
    mk = lambda: jax.jit(lambda x: f(x))
    for k in (1.0, 2.0, 3.0):
        m.K = k
        show(f"{tag}{k}", lambda: mk()(x))
for name in ("r45mod", "r45pkg.decoder", "r45pkg"):
    del sys.modules[name]
