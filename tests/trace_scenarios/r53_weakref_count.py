# Review 53 (wrcount): weakref.getweakrefcount read while tracing: weakref is off the plain stdlib since.
# weakref.getweakrefcount (weakref is on PLAIN_STDLIB) read at trace time
import weakref


class Box:
    pass


B = Box
mk = lambda: jax.jit(lambda a: a * weakref.getweakrefcount(B))
show("s1", lambda: mk()(x))


def cb(r):
    pass


refs = [weakref.ref(B, cb), weakref.ref(B, lambda r: None)]
show("s2", lambda: mk()(x))
