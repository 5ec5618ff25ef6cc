# A user class whose __module__ names no imported module (a plugin/config file loaded with
# exec or runpy.run_path) and whose body holds only builtins (a dict's bound .get) passes
# pcache's "_compiled" extension-class test, so it is keyed by identity only: state read
# through it (the dict behind its bound builtin method) is not compared.
STATE = {"k": 1.0}
ns = {"__name__": "plugin_cfg", "STATE": STATE}
exec("class Base: pass\nclass C(Base):\n    get = STATE.get\n", ns)
C = ns["C"]
mk = lambda: jax.jit(lambda v: v * C.get("k"))
show("a", lambda: mk()(x))
STATE["k"] = 2.0
show("b", lambda: mk()(x))
