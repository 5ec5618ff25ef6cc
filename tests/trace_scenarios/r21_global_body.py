# Review 21: a partial or bound method held by a global (in a dict too) as a scan, cond, while or checkpoint body, traced eagerly in another state; the global rebound to a new, equal one.
import dataclasses
import functools

from jax import lax


def body(cfg, c, xi):
    return c * cfg[0] + xi, c


def f(cfg, a):
    return a * cfg[0]


def wbody(cfg, c):
    return c * cfg[0]


@dataclasses.dataclass(frozen=True)
class Cfg:
    k: list

    def body(self, c, xi):
        return c * self.k[0] + xi, c


init = jnp.float32(1.0)
xs = jnp.arange(3, dtype=jnp.float32)

cfg = [1.0]
P = functools.partial(body, cfg)
show("eager", lambda: lax.scan(P, init, xs)[0])
cfg[0] = 2.0
mk = lambda: jax.jit(lambda a: lax.scan(P, init, a)[0])
mk()(xs)
P = functools.partial(body, [2.0])
show("scan", lambda: mk()(xs))

cfg2 = [1.0]
Q = functools.partial(f, cfg2)
show("eager_cond", lambda: lax.cond(True, Q, lambda a: a, x))
cfg2[0] = 2.0
mkc = lambda: jax.jit(lambda a, p: lax.cond(p, Q, lambda a: a, a))
mkc()(x, True)
Q = functools.partial(f, [2.0])
show("cond", lambda: mkc()(x, True))

cfg3 = [1.0]
W = functools.partial(wbody, cfg3)
show("eager_while", lambda: lax.while_loop(lambda c: c[1] < 5, W, x))
cfg3[0] = 2.0
mkw = lambda: jax.jit(lambda a: lax.while_loop(lambda c: c[1] < 5, W, a))
mkw()(x)
W = functools.partial(wbody, [2.0])
show("while", lambda: mkw()(x))

cfg4 = [1.0]
T = {"f": functools.partial(f, cfg4)}
show("eager_remat", lambda: jax.checkpoint(T["f"])(x))
cfg4[0] = 2.0
mkr = lambda: jax.jit(lambda a: jax.checkpoint(T["f"])(a))
mkr()(x)
T = {"f": functools.partial(f, [2.0])}
show("remat", lambda: mkr()(x))

lst = [1.0]
M = Cfg(lst).body
show("eager_method", lambda: lax.scan(M, init, xs)[0])
lst[0] = 2.0
mkm = lambda: jax.jit(lambda a: lax.scan(M, init, a)[0])
mkm()(xs)
M = Cfg([2.0]).body
show("method", lambda: mkm()(xs))
