# alone
# A registration a JAX import made and pcache proved its (no program code ran while
# sparse was imported), removed by B before pcache reads the tables again: an
# override, in the key (review 164).
import os


from jax.experimental import sparse
from jax._src.interpreters import batching

if os.environ["PHASE"] == "B":
    del batching.vmappables[sparse.BCOO]


def f(v):
    data = jnp.stack([v, v * 2.0])
    idx = jnp.zeros((2, 3, 1), jnp.int32) + v.astype(jnp.int32)[None, :, None]
    s = sparse.BCOO((data, idx), shape=(2, 3))
    return jax.vmap(lambda e: e.data * e.shape[0])(s)


show("vmap", lambda: jax.jit(f)(x))
