# Same root as f_ccls_library.py: once a class defined outside sys.modules (exec'd plugin
# namespace) with only builtin attributes is judged "library" (memoized), plain Python
# class attributes added to it later (C.scale = 1.0) are not compared either.
ns = {"__name__": "plugin_cfg"}
exec("class Base: pass\nclass C(Base):\n    n = len\n", ns)
C = ns["C"]
show("0", lambda: jax.jit(lambda v: v + C.n((1, 2)))(x))  # C first walked: judged library
C.scale = 1.0
mk = lambda: jax.jit(lambda v: v * C.scale)
show("a", lambda: mk()(x))
C.scale = 2.0
show("b", lambda: mk()(x))
