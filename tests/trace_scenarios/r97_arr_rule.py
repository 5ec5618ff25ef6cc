# Review 97 (executable key): a lowering rule of JAX's own code over the program's
# JAX array registered on neg_p, then over another: a C++ object described by its
# (empty) __dict__ (now only objects whose state is all in view are described)
from functools import partial
from jax._src.interpreters import mlir
from jax import lax


def reg(F):
    mlir.register_lowering(
        lax.neg_p,
        mlir.lower_fun(partial(lax.mul, y=jnp.asarray(F, jnp.float32)), multiple_results=False),
    )


ORIG = mlir._lowerings[lax.neg_p].rule
mk = lambda: jax.jit(lambda a: lax.neg(a))
reg(2.0)
for i in range(3):
    show(f"a{i}", lambda: mk()(x))
reg(5.0)
for i in range(3):
    show(f"b{i}", lambda: mk()(x))
mlir.register_lowering(lax.neg_p, ORIG)  # (the driver runs every scenario in one process)
