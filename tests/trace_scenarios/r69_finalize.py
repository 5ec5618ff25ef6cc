# Review 69 (finalize): a weakref.finalize instance (no dict, slots __weakref__ only: "stateless") read while traced: never reused since.
import weakref


class Obj:
    pass


o = Obj()
FIN = weakref.finalize(o, lambda: None)
mk = lambda: jax.jit(lambda a: a * (2.0 if FIN.alive else 3.0))
show("s1", lambda: mk()(x))
FIN.detach()
show("s2", lambda: mk()(x))
