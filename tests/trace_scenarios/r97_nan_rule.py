# Review 97 (executable key): a lowering rule of JAX's own code over the program's
# float NaN registered on neg_p, then one of the other sign: described by repr, which
# prints every NaN alike (now by the float's bits)
from functools import partial
from jax._src.interpreters import mlir
from jax import lax


def reg(F):
    mlir.register_lowering(lax.neg_p, mlir.lower_fun(partial(lax.mul, y=F), multiple_results=False))


ORIG = mlir._lowerings[lax.neg_p].rule
mk = lambda: jax.jit(lambda a: lax.neg(a))
reg(float("nan"))
for i in range(3):
    show(f"p{i}", lambda: mk()(x))
reg(-float("nan"))
for i in range(3):
    show(f"n{i}", lambda: mk()(x))
mlir.register_lowering(lax.neg_p, ORIG)  # (the driver runs every scenario in one process)
