# alone
# A registration a JAX import made and pcache proved its (no program code ran while
# sparse was imported), removed by B before pcache reads the tables again: an
# override, in the key (review 164).
import os


from jax.experimental import sparse
from jax._src.interpreters import batching

if os.environ["PHASE"] == "B":
    del batching.vmappables[sparse.BCOO]


def f(v):  # (a BCOO of two rows, vmapped over them)
    s = sparse.BCOO.fromdense(jnp.stack([v, 2.0 * v]), nse=3)
    return jax.vmap(lambda e: e.data * e.shape[0])(s)


show("vmap", lambda: jax.jit(f)(x))
