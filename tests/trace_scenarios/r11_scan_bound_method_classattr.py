# A bound method kept alive and used as a lax.scan body: JAX caches the body's trace
# on that object. A class attribute it reads (self.SCALE) changes; the next trace
# (stock too) gets the stale body from JAX's cache, and pcache records that trace
# under the NEW key (note_states watches functions' own state and globals; here no
# walked function's state names M: M subclasses a frozen dataclass, whose generated
# methods close over the base only). A new, equal object's method then hits that
# stale trace: stock traces afresh (a different bound method), pcache does not.
import dataclasses


@dataclasses.dataclass(frozen=True)
class Base:
    pass


class M(Base):
    SCALE = 1.0

    def body(self, c, xi):
        return c + xi * self.SCALE, None


a = M()
ma = a.body  # kept alive (e.g. stored on a trainer)
mk = lambda m: jax.jit(lambda xs: jax.lax.scan(m, 0.0, xs)[0])
show("scale1", lambda: mk(ma)(x))
M.SCALE = 2.0
mk(ma)(x)  # stock: JAX's stale trace of ma; pcache traces afresh (documented)
b = M()
show("scale2-new-object", lambda: mk(b.body)(x))
