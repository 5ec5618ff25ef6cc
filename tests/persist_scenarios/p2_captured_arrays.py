# Captured JAX arrays are keyed by content across processes (phase 2): before, the
# persisted key's walker met them through the in-process walker's dispatch table and
# keyed them by id (an address another process may give another array); a global's,
# a closure's, a default's. A and B differ in one array's values and another's shape
# (traced again); equal ones are served.  # served
import os

import jax
import jax.numpy as jnp

show = globals()["show"]
x = globals()["x"]
B = os.environ["PHASE"] == "B"
W = jnp.arange(3.0) * (2.0 if B else 1.0)
S = jnp.zeros(5 if B else 3)
SAME = jnp.arange(3.0) + 0.5


def by_value(v):
    return v * W


def by_shape(v):
    return v * S.shape[0]


def closure(a):
    return lambda v: v - a


def default(v, w=jnp.full(3, 4.0 if B else 3.0)):
    return v * w


show("global-values", lambda: jax.jit(by_value)(x))
show("global-shape", lambda: jax.jit(by_shape)(x))
show("closure", lambda: jax.jit(closure(jnp.ones(3) * (3.0 if B else 1.0)))(x))
show("default", lambda: jax.jit(default)(x))
show("same-global", lambda: jax.jit(lambda v: v + SAME)(x))
show("same-closure", lambda: jax.jit(closure(jnp.ones(3)))(x))
