JF = jax.jit(lambda v: v)
JF.scale = 2.0
mk = lambda: jax.jit(lambda v: JF(v) * JF.scale)
show("scale=2", lambda: mk()(x))
JF.scale = 3.0
show("scale=3", lambda: mk()(x))
