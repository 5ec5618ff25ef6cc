# Review 57 (imp_write2): a trace-time write two levels below a module imported inside the function: a write through such a local is never reused since.
def f(a):
    import jax

    jax.experimental.LAST_R57 = 7.0
    return a * 2.0


mk = lambda: jax.jit(lambda a: f(a))
show("s1", lambda: mk()(x))
show("s1b", lambda: mk()(x))
jax.experimental.LAST_R57 = 0.0
show("s2", lambda: mk()(x))
show("last", lambda: np.float32(jax.experimental.LAST_R57))
