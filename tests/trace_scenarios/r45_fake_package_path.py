# Review 45 (p2_pkgpath): a package the program made, its __path__ pointing at a library directory, made its submodule library code: a package's search locations come from the path finder now, not its __path__.
import sys, types, os, json

jd = os.path.dirname(json.__file__)
pkg = types.ModuleType("r45pkg")
pkg.__path__ = [jd]
sys.modules["r45pkg"] = pkg
m = types.ModuleType("r45pkg.decoder")
m.__file__ = os.path.join(jd, "decoder.py")
sys.modules["r45pkg.decoder"] = m
exec(compile("class C:\n    def f(x):\n        return x * K\n", "<string>", "exec"), vars(m))
f = m.C.f
mk = lambda: jax.jit(lambda x: f(x))
for k in (1.0, 2.0, 3.0):
    m.K = k
    show(f"k{k}", lambda: mk()(x))
del sys.modules["r45pkg.decoder"], sys.modules["r45pkg"]
