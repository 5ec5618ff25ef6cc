# Review 22: a callable made while tracing (a dataclass with a __call__, a bound method, a class with its own __eq__) equal to another one JAX still holds a trace of; JAX's caches match by ==, so the trace recorded was that other one's.
import dataclasses
import gc

from jax import lax


@dataclasses.dataclass(frozen=True)
class A:
    k: float

    def __call__(self, a):
        return a * 0 + jnp.copysign(1.0, self.k)


@dataclasses.dataclass(frozen=True)
class Step:
    k: float

    def __call__(self, c, _):
        return c + (1.0 if isinstance(self.k, float) else 5.0), None


K = 1.0


@dataclasses.dataclass(frozen=True)
class M:
    a: float

    def f(self, a):
        return a * self.a + K


class Body:
    def __init__(self, n):
        self.n = n

    def __eq__(self, o):
        return type(o) is Body

    def __hash__(self):
        return 0

    def __call__(self, a):
        return a * self.n


keep = [A(-0.0), Step(2)]
lax.cond(x[0] > -1, keep[0], keep[0], x)
lax.scan(keep[1], x, None, length=2)
mka = lambda k: jax.jit(lambda a: lax.cond(a[0] > -1, A(k), A(k), a))
mks = lambda k: jax.jit(lambda a: lax.scan(Step(k), a, None, length=2)[0])
mka(0.0)(x)  # stock: the trace of A(-0.0) (JAX's cache, by ==); pcache traces afresh
mks(2.0)(x)
del keep
gc.collect()
show("cond", lambda: mka(0.0)(x))
show("scan", lambda: mks(2.0)(x))

obj = M(2.0)
held = obj.f
lax.cond(x[0] > -1, held, held, x)
K = 10.0
mkm = lambda: jax.jit(lambda a: lax.cond(a[0] > -1, obj.f, obj.f, a))
mkm()(x)
del held
gc.collect()
show("method", lambda: mkm()(x))

kept = Body(7.0)
jax.checkpoint(kept)(x)
mkb = lambda k: jax.jit(lambda a: jax.checkpoint(Body(k))(a))
mkb(3.0)(x)
del kept
gc.collect()
show("remat", lambda: mkb(3.0)(x))
