# Review 20: the same, the stale trace made under jit by a callable pcache could not key (its walk refused before reaching the branch).
from jax import lax


class Box:
    pass


def make_h(L):
    def h(a):
        return a * L[0]

    return h


L = [2.0]
h = make_h(L)
mk = lambda hh: jax.jit(lambda a: lax.cond(a[0] >= 0, hh, hh, a))


def mk_other(hh):
    b = Box()
    return jax.jit(lambda a: (b, lax.cond(a[0] >= 0, hh, hh, a))[1])


show("s1", lambda: mk(h)(jnp.arange(4, dtype=jnp.float32)))
L[0] = 1.0
show("s2", lambda: mk_other(h)(x))
L[0] = 2.0
mk(h)(x)
show("s5", lambda: mk(make_h([2.0]))(x))
