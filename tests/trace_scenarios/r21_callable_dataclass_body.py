# Review 21: a frozen dataclass with a __call__ as a scan, cond or checkpoint body (JAX keys its trace on that object), traced in another state, then recorded and served to a new, equal instance.
import dataclasses

from jax import lax


@dataclasses.dataclass(frozen=True, eq=False)
class Body:
    k: list

    def __call__(self, c, xi):
        return c * self.k[0] + xi, c


@dataclasses.dataclass(frozen=True, eq=False)
class F:
    k: list

    def __call__(self, a):
        return a * self.k[0]


init = jnp.float32(1.0)
xs = jnp.arange(3, dtype=jnp.float32)
mk = lambda b: jax.jit(lambda a: lax.scan(b, init, a)[0])
lst = [1.0]
b = Body(lst)
show("a", lambda: mk(b)(xs))
lst[0] = 2.0
mk(b)(xs)  # stock: JAX's stale trace; pcache traces afresh (documented)
show("c", lambda: mk(Body([2.0]))(xs))

lst2 = [1.0]
f = F(lst2)
show("eager", lambda: lax.cond(True, f, lambda a: a, x))
lst2[0] = 2.0
mkc = lambda ff: jax.jit(lambda a, p: lax.cond(p, ff, lambda a: a, a))
mkc(f)(x, True)
show("cond", lambda: mkc(F([2.0]))(x, True))

lst3 = [1.0]
g = F(lst3)
show("eager_remat", lambda: jax.checkpoint(g)(x))
lst3[0] = 2.0
mkr = lambda ff: jax.jit(lambda a: jax.checkpoint(ff)(a))
mkr(g)(x)
show("remat", lambda: mkr(F([2.0]))(x))
