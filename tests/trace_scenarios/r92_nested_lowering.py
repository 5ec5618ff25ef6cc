# Review 92, in process (executable key): a program's lowering rule registered for
# exp_p after a logistic program was compiled. logistic_p's rule binds exp_p while
# lowering, exp_p is not in the jaxpr: the memory tier served the old executable.
from jax import lax
from jax._src.interpreters import mlir
from jax._src.lib.mlir.dialects import hlo


def my_exp_rule(ctx, a, **params):
    return [hlo.log(a)]


mk = lambda: jax.jit(lambda a: lax.logistic(a))
for i in range(3):
    show(f"a{i}", lambda: mk()(x))
saved = mlir._lowerings[lax.exp_p]
mlir.register_lowering(lax.exp_p, my_exp_rule)
try:
    for i in range(3):
        show(f"b{i}", lambda: mk()(x))
finally:
    mlir._lowerings[lax.exp_p] = saved  # (the driver runs every scenario in one process)
for i in range(2):
    show(f"c{i}", lambda: mk()(x))
