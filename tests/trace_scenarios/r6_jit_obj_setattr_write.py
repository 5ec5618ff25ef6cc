"""A trace-time write, by setattr with a constant name, to a global jit object's
attributes (the global is guarded by identity): stock writes on every trace."""

helper = jax.jit(lambda v: v)
helper.traced = 0


def f(v):
    setattr(helper, "traced", 1)
    return v


mk = lambda: jax.jit(lambda v: f(v))
show("a", lambda: mk()(x))
helper.traced = 0
show("b", lambda: mk()(x))
show("traced", lambda: np.float32(helper.traced))
