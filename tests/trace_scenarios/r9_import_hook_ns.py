# user code exec'd in a namespace whose own builtins dict carries a user __import__
# (consistent builtins, so allowed): `import math` in the traced body runs that hook,
# whose result depends on a global of the hook's module
import builtins, math, cmath

SEL = 0


def imp(name, *a, **k):
    return (math, cmath)[SEL] if name == "math" else __import__(name, *a, **k)


ns = {"__builtins__": {**vars(builtins), "__import__": imp}, "jax": jax}
exec(
    "def mk():\n    def f(x):\n        import math as m\n        return x * len(m.__name__)\n    return jax.jit(f)\n",
    ns,
)
mk = ns["mk"]
show("math", lambda: mk()(x))
SEL = 1
show("cmath", lambda: mk()(x))
