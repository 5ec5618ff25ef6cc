# Review 92 (executable key): in B only, JAX's own log lowering rule registered for
# exp_p. The program binds logistic_p, whose rule (mlir.lower_fun(logistic_impl))
# binds exp_p while lowering: exp_p is not in the jaxpr, and A's trace and executable
# were served.
# alone: it registers a lowering rule
import os
from functools import partial

from jax import lax
from jax._src.interpreters import mlir
from jax._src.lax.lax import _nary_lower_hlo
from jax._src.lib.mlir.dialects import hlo

if os.environ["PHASE"] == "B":
    mlir.register_lowering(lax.exp_p, partial(_nary_lower_hlo, hlo.log))


def f(a):
    return lax.logistic(a)


show("p1", lambda: jax.jit(f)(x))
