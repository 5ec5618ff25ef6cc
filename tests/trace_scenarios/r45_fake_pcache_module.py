# Review 45 (p1_pcdir): a module the program made, its __file__ in pcache's own directory, was taken as pcache's (library) code: pcache's modules now only at the file their name says.
import sys, types, os, importlib.util

d = os.path.dirname(importlib.util.find_spec("pcache").origin)
m = types.ModuleType("r45mod")
m.__file__ = os.path.join(d, "_r45.py")
sys.modules["r45mod"] = m
exec(compile("class C:\n    def f(x):\n        return x * K\n", "<string>", "exec"), vars(m))
f = m.C.f
mk = lambda: jax.jit(lambda x: f(x))
for k in (1.0, 2.0, 3.0):
    m.K = k
    show(f"k{k}", lambda: mk()(x))
del sys.modules["r45mod"]
