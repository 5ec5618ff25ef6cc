# A captured weakref is keyed by its target only; its __callback__ (a user function,
# readable and callable at trace time) is not in the key.
import weakref


def target(v):
    return v


mk = lambda wr: jax.jit(lambda v: v * wr.__callback__(wr))
show("cb1", lambda: mk(weakref.ref(target, lambda r: 1.0))(x))
show("cb3", lambda: mk(weakref.ref(target, lambda r: 3.0))(x))
