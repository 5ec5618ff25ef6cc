# Review 85 (xmeta): the XLA metadata context (jax.experimental.xla_metadata) is one of
# JAX's trace-context values, compared by its own == ({"k": 1} == {"k": True} ==
# {"k": 1.0}); a trace reading it was served across the three.
from jax._src.xla_metadata_lib import current_xla_metadata
from jax.experimental.xla_metadata import set_xla_metadata

mk = lambda: jax.jit(lambda a: a.astype(jnp.asarray(current_xla_metadata()["k"]).dtype))
for i, v in enumerate([1, 1, 1, True, True, 1.0, 1.0]):
    with set_xla_metadata(k=v):
        show(f"s{i}", lambda: mk()(x))
