"""An exec-made function whose namespace's __builtins__ is replaced after it was made:
the function keeps reading the builtins it was created with."""

B = {"float": float}
ns = {"__builtins__": B}
exec("def f(v):\n    return v * SC\n", ns)
f = ns["f"]
ns["__builtins__"] = {"float": float}  # the namespace's now; f keeps B
B["SC"] = 2.0
mk = lambda: jax.jit(lambda v: f(v))
show("sc2", lambda: mk()(x))
B["SC"] = 3.0
show("sc3", lambda: mk()(x))
