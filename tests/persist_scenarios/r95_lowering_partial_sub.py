# Review 95 (executable key), across processes: a lowering rule on lax.neg_p that is a
# program's subclass of functools.partial over JAX's own neg rule, its __call__ lowering
# y * G, G different in A and B: described as JAX's own partial in both, one key, and B
# was served A's executable.
# alone: it registers a lowering rule
import functools
import os

from jax import lax
from jax._src.interpreters import mlir

G = 2.0 if os.environ["PHASE"] == "A" else 3.0
orig = mlir._lowerings[lax.neg_p].rule


class P(functools.partial):
    def __call__(self, ctx, a, **kw):
        return mlir.lower_fun(lambda y: y * G, multiple_results=False)(ctx, a)


mlir.register_lowering(lax.neg_p, P(orig))
show("p1", lambda: jax.jit(lambda a: -a)(x))
