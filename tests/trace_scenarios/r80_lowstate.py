# Review 80 (lowerstate): a lowering rule of library code over the program's data
# (lower_fun(partial(jnp.multiply, F))) registered on one of JAX's own primitives, F a
# numpy array changed in place between steps: the rule was taken as JAX's own (JAX's
# rules hold state too), never walked into the key: the stale trace was served.
import functools

from jax import lax
from jax._src.interpreters import mlir

SAVED = mlir._lowerings[lax.neg_p]  # (restored below: the driver runs every scenario)
SAVED_CPU = mlir._platform_specific_lowerings["cpu"].get(lax.neg_p)
F = np.full(3, 2.0, dtype=np.float32)
mlir.register_lowering(
    lax.neg_p, mlir.lower_fun(functools.partial(jnp.multiply, F), multiple_results=False)
)
mk = lambda: jax.jit(lambda a: -a + 1.0)
for i in range(3):
    show(f"a{i}", lambda: mk()(x))
F[:] = 5.0
for i in range(3):
    show(f"b{i}", lambda: mk()(x))
# the same, registered for one platform
L = np.full(3, 3.0, dtype=np.float32)
mlir.register_lowering(
    lax.neg_p,
    mlir.lower_fun(functools.partial(jnp.multiply, L), multiple_results=False),
    platform="cpu",
)
for i in range(3):
    show(f"c{i}", lambda: mk()(x))
L[:] = 7.0
for i in range(3):
    show(f"d{i}", lambda: mk()(x))
mlir._lowerings[lax.neg_p] = SAVED
if SAVED_CPU is None:
    del mlir._platform_specific_lowerings["cpu"][lax.neg_p]
else:
    mlir._platform_specific_lowerings["cpu"][lax.neg_p] = SAVED_CPU
