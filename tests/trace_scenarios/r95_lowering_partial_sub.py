# Review 95 (executable key): a lowering rule on lax.neg_p that is a program's subclass of
# functools.partial over JAX's own neg rule, overriding __call__: described as JAX's
# partial (isinstance), so the memory tier served the old executable.
import functools
from jax import lax
from jax._src.interpreters import mlir

G = 2.0
orig = mlir._lowerings[lax.neg_p].rule


class P(functools.partial):
    def __call__(self, ctx, a, **kw):
        return mlir.lower_fun(lambda y: y * G, multiple_results=False)(ctx, a)


mlir.register_lowering(lax.neg_p, P(orig))
mk = lambda: jax.jit(lambda a: -a)
for i in range(4):
    G = float(i + 2)
    show(f"s{i}", lambda: mk()(x))
mlir.register_lowering(lax.neg_p, orig)  # (one process runs them all)
