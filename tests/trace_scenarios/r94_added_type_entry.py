# Review 94 (type tables, an entry added): JAX's own entry for int put under
# np.float32 in dtypes.python_scalar_types_to_dtypes, which held no np.float32 (a key
# new to that table, taken for a first registration; the type tables were not among
# the tables whose writes give every trace a new key).
from jax._src import dtypes as D

mk = lambda: jax.jit(lambda a: (a * 1.5).astype(jnp.result_type(np.float32)))
for i in range(3):
    show(f"a{i}", lambda: mk()(x))
D.python_scalar_types_to_dtypes[np.float32] = D.python_scalar_types_to_dtypes[int]
try:
    for i in range(3):
        show(f"b{i}", lambda: mk()(x))
finally:
    del D.python_scalar_types_to_dtypes[np.float32]  # (one process runs them all)
