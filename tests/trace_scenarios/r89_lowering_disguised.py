# Review 89 (executable key, not trace reuse): a lowering rule of the program's on
# lax.sin_p whose __module__ and __qualname__ name a JAX function, reading a global. It
# was described as JAX's own code by its __module__ string (a persistent key, the same
# whatever the global holds), so the memory tier served the first executable.
from jax import lax
from jax._src.interpreters import mlir

FACT = 2.0


def my_rule(ctx, a, **params):
    return mlir.lower_fun(lambda b: b * FACT, multiple_results=False)(ctx, a)


my_rule.__module__ = "jax._src.lax.lax"
my_rule.__qualname__ = "_sin_lowering_r89"
saved = mlir._lowerings[lax.sin_p]
mlir.register_lowering(lax.sin_p, my_rule)
mk = lambda: jax.jit(lambda a: lax.sin(a))
try:
    for i in range(5):
        FACT = float(i + 2)
        show(f"s{i}", lambda: mk()(x))
finally:
    mlir._lowerings[lax.sin_p] = saved  # (the driver runs every scenario in one process)
