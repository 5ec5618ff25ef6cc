# Review 97 (executable key): a lowering rule of JAX's own code over the program's
# JAX NamedTuple (GatherDimensionNumbers) registered twice with other fields: a
# tuple subclass described without its items
from functools import partial
from jax._src.interpreters import mlir
from jax import lax

G = lax.GatherDimensionNumbers
I = jnp.array([[1], [0]], jnp.int32)  # the same object in both registrations


def reg(dn, ss):
    mlir.register_lowering(
        lax.neg_p,
        mlir.lower_fun(
            partial(
                lax.gather,
                start_indices=I,
                dimension_numbers=dn,
                slice_sizes=ss,
                mode=lax.GatherScatterMode.CLIP,
            ),
            multiple_results=False,
        ),
    )


y = jnp.arange(4.0, dtype=jnp.float32).reshape(2, 2)
ORIG = mlir._lowerings[lax.neg_p].rule
mk = lambda: jax.jit(lambda a: lax.neg(a))
reg(G(offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,)), (1, 2))
for i in range(3):
    show(f"a{i}", lambda: mk()(y))
reg(G(offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(1,)), (1, 2))
for i in range(3):
    show(f"b{i}", lambda: mk()(y))
mlir.register_lowering(lax.neg_p, ORIG)  # (the driver runs every scenario in one process)
