# Review 20: JAX's trace of a cond branch made eagerly in another state (pcache never saw it), the state changed back, then recorded and served to a new, equal branch.
from jax import lax


def make_h(L):
    def h(a):
        return a * L[0]

    return h


L = [2.0]
h = make_h(L)
mk = lambda hh: jax.jit(lambda a: lax.cond(a[0] >= 0, hh, hh, a))
show("s1", lambda: mk(h)(jnp.arange(4, dtype=jnp.float32)))
L[0] = 1.0
show("s2", lambda: lax.cond(True, h, h, x))  # eager: JAX caches h's trace at 1.0
L[0] = 2.0
mk(h)(x)  # stock: JAX's stale trace (1.0); pcache traces afresh (documented)
show("s5", lambda: mk(make_h([2.0]))(x))
