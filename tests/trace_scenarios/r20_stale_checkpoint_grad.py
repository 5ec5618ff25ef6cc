# Review 20 (own, same class): a checkpointed body and a function under grad, traced eagerly in another state.
def make_h(L):
    def h(a):
        return jnp.sin(a) * L[0]

    return h


L = [2.0]
h = make_h(L)
mk = lambda hh: jax.jit(lambda a: jax.checkpoint(hh)(a))
show("s1", lambda: mk(h)(jnp.arange(4, dtype=jnp.float32)))
L[0] = 1.0
show("s2", lambda: jax.checkpoint(h)(x))
L[0] = 2.0
mk(h)(x)
show("s5", lambda: mk(make_h([2.0]))(x))
M = [2.0]
g = make_h(M)
mkg = lambda gg: jax.jit(jax.grad(lambda a: jnp.sum(gg(a))))
show("g1", lambda: mkg(g)(jnp.arange(4, dtype=jnp.float32)))
M[0] = 1.0
show("g2", lambda: jax.grad(lambda a: jnp.sum(g(a)))(x))
M[0] = 2.0
mkg(g)(x)
show("g5", lambda: mkg(make_h([2.0]))(x))
