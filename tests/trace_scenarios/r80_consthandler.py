# Review 80 (consthandler): a constant handler (mlir.register_constant_handler)
# registered between steps for the type of jaxpr literals: it changes how the literal
# 2.0 lowers, and the executable key did not see it (stale even with trace reuse off).
from jax._src import literals
from jax._src.interpreters import mlir

mk = lambda: jax.jit(lambda a: a * 2.0)
for i in range(3):
    show(f"a{i}", lambda: mk()(x))
T = literals.TypedNdArray
SAVED = mlir._constant_handlers[T]  # (restored below: the driver runs every scenario)
ND = mlir.get_constant_handler(np.ndarray)
mlir.register_constant_handler(T, lambda val, aval=None: ND(np.asarray(val) * 3, aval))
for i in range(3):
    show(f"b{i}", lambda: mk()(x))
mlir._constant_handlers[T] = SAVED
for i in range(3):
    show(f"c{i}", lambda: mk()(x))
