# alone
# A JAX type-handler table pcache first meets after the program changed it: sparse
# imported while a program finder ran (so no read proves what the import registered),
# and B removes BCOO from `batching.vmappables` (which that import filled) before
# pcache reads the tables again; A's vmap of a BCOO is not B's (review 164).
import os
import sys


class Log:  # (an import logger: finds nothing)
    seen = []

    def find_spec(self, name, path=None, target=None):
        self.seen.append(name)


sys.meta_path.insert(0, Log())
from jax.experimental import sparse
from jax._src.interpreters import batching

sys.meta_path.pop(0)
if os.environ["PHASE"] == "B":
    del batching.vmappables[sparse.BCOO]


def f(v):
    data = jnp.stack([v, v * 2.0])
    idx = jnp.zeros((2, 3, 1), jnp.int32) + v.astype(jnp.int32)[None, :, None]
    s = sparse.BCOO((data, idx), shape=(2, 3))
    return jax.vmap(lambda e: e.data * e.shape[0])(s)


show("vmap", lambda: jax.jit(f)(x))
