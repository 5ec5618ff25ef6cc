# Review 94 (type tables, an entry added), across processes: in B only, JAX's own
# entry for int put under np.float32 in dtypes.python_scalar_types_to_dtypes (which
# held none): stock B gives int32, and A's trace was served (an added entry was taken
# for a first registration and named in no key).
# alone: it registers handlers
import os

from jax._src import dtypes as D

if os.environ["PHASE"] == "B":
    D.python_scalar_types_to_dtypes[np.float32] = D.python_scalar_types_to_dtypes[int]


def f(a):
    return (a * 1.5).astype(jnp.result_type(np.float32))


show("p1", lambda: jax.jit(f)(x))
