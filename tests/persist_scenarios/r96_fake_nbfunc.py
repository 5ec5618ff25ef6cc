# Review 96 (executable key), across processes: a program's lowering rule on neg_p
# whose class is named nanobind's nb_func and whose instance names a JAX module,
# lowering y * S, S different in A and B: described as JAX's own C++ in both, one key,
# and B was served A's executable.
# alone: it registers a lowering rule
import os

from jax._src.interpreters import mlir
from jax._src.lax import lax as laxi

S = [2.0 if os.environ["PHASE"] == "A" else 5.0]


class nb_func:
    def __call__(self, ctx, x, **params):
        return mlir.lower_fun(lambda y: [y * S[0]], multiple_results=True)(ctx, x)


nb_func.__module__ = "nanobind"
r = nb_func()
r.__module__ = "jax._src.lax.lax"
r.__qualname__ = "_neg_lower"
mlir.register_lowering(laxi.neg_p, r)
show("p1", lambda: jax.jit(lambda a: -a)(x))
