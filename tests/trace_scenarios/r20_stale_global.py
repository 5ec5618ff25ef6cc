# Review 20: the branch a module global, its stale trace made by an eager cond, then the global rebound to a fresh, equal function.
from jax import lax


def make_h(L):
    def h(a):
        return a * L[0]

    return h


L = [2.0]
H = make_h(L)
mk = lambda: jax.jit(lambda a: lax.cond(a[0] >= 0, H, H, a))
show("s1", lambda: mk()(jnp.arange(4, dtype=jnp.float32)))
L[0] = 1.0
lax.cond(True, H, H, x)
L[0] = 2.0
mk()(x)
H = make_h([2.0])
show("s5", lambda: mk()(x))
