"""A scenario of the second outside review of trace reuse (see test_trace_review.py)."""


class Scaled:
    def __init__(self, v, s):
        self.v, self.s = v, s


jax.tree_util.register_pytree_node(Scaled, lambda o: ((o.v,), o.s), lambda s, c: Scaled(c[0], s))
xi = jnp.arange(3, dtype=jnp.int32)
mk = lambda: jax.jit(lambda o: o.v * o.s)
show("aux=2", lambda: mk()(Scaled(xi, 2)))
show("aux=2.0", lambda: mk()(Scaled(xi, 2.0)))
mk2 = lambda: jax.jit(lambda d: sum(v * k for k, v in d.items()))
show("{1:}", lambda: mk2()({1: xi}))
show("{1.0:}", lambda: mk2()({1.0: xi}))
