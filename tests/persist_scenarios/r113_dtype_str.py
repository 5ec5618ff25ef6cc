# Review 113 (q1_dtype_str): captured JAX arrays whose dtypes share numpy's `dtype.str` ('<V1': float8_e4m3fn,
# float8_e4m3b11fnuz, int4, uint4, float4_e2m1fn) and whose bytes are equal: A and B differ
# only in the dtype's name.
# The key held dtype.str; now the dtype by all it is.  # served
import os
import numpy as np
import jax
import jax.numpy as jnp

show = globals()["show"]
x = globals()["x"]
B = os.environ["PHASE"] == "B"
RAW = np.array([0x38, 0x30, 0x01], np.uint8)
W = jnp.asarray(RAW.view(jnp.float8_e4m3b11fnuz if B else jnp.float8_e4m3fn))
U = jnp.asarray(np.array([1, 2, 3], np.uint8).view(jnp.float8_e4m3fn if B else jnp.uint4))
SAME = jnp.asarray(RAW.view(jnp.float8_e4m3fn))


def by_global(v):
    return v * W.astype(jnp.float32)


def by_global_u(v):
    return v * U.astype(jnp.float32)


def closure(a):
    return lambda v: v + a.astype(jnp.float32)


def default(v, w=jnp.asarray(RAW.view(jnp.float4_e2m1fn if B else jnp.int4))):
    return v * w.astype(jnp.float32)


show("global", lambda: jax.jit(by_global)(x))
show("global-u", lambda: jax.jit(by_global_u)(x))
show("closure", lambda: jax.jit(closure(jnp.asarray(RAW.view(jnp.uint4 if B else jnp.int4))))(x))
show("default", lambda: jax.jit(default)(x))
show("same", lambda: jax.jit(lambda v: v * SAME.astype(jnp.float32))(x))
