# Review 93 (executable key, across processes): exp_p's rule is lower_fun(myexp_p.bind),
# a program's primitive lowering to exp in A and to log in B. The rule was described
# as JAX's own (the primitive by its name), so B loaded A's executable from disk.
# alone: it registers lowering rules
import os

from jax._src.interpreters import mlir
from jax._src.lax import lax as L
from jax._src.lib.mlir.dialects import hlo
from jax.extend.core import Primitive

myexp_p = Primitive("myexp")
myexp_p.def_abstract_eval(lambda a, **kw: jax.core.ShapedArray(a.shape, a.dtype))
op = hlo.exponential if os.environ["PHASE"] == "A" else hlo.log
mlir.register_lowering(myexp_p, lambda ctx, a, **kw: [op(a)])
mlir.register_lowering(L.exp_p, mlir.lower_fun(myexp_p.bind, multiple_results=False))
mk = lambda: jax.jit(lambda a: jnp.exp(a) + 1.0)
for i in range(3):
    show(f"a{i}", lambda: mk()(x))
