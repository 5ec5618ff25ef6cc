# Review 78 (low1): a user lowering rule registered on one of JAX's own primitives (mlir.register_lowering(lax.neg_p, ...)) over a global the program changes: the rule's entry (a LoweringRuleEntry) was taken as data, so the primitive was not a user primitive: never reused since.
from jax import lax
from jax._src.interpreters import mlir

SAVED = mlir._lowerings[lax.neg_p]  # (restored below: the driver runs every scenario)
K = 2.0
mlir.register_lowering(lax.neg_p, mlir.lower_fun(lambda v: v * K, multiple_results=False))
mk = lambda: jax.jit(lambda a: -a)
for i in range(3):
    show(f"s{i}", lambda: mk()(x))
K = 3.0
for i in range(3, 6):
    show(f"s{i}", lambda: mk()(x))
mlir._lowerings[lax.neg_p] = SAVED
