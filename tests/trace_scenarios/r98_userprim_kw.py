# Review 98 (executable key): a user primitive lowered by JAX's own
# lower_fun(partial(lax.mul, y=2.0)), the partial's keywords changed in place, bound
# inside a global inner jit (the same sub-jaxpr object each time): the sub-jaxpr's
# digest was memoized over a rule described by content (now not kept).
import functools
from jax import lax
from jax.extend.core import Primitive
from jax.interpreters import mlir

my_p = Primitive("r98_scale")
my_p.def_abstract_eval(lambda a: a)
P = functools.partial(lax.mul, y=2.0)
mlir.register_lowering(my_p, mlir.lower_fun(P, multiple_results=False))
inner = jax.jit(lambda a: my_p.bind(a))
mk = lambda: jax.jit(lambda a: inner(a) + 1.0)
show("s1", lambda: mk()(x))
show("s2", lambda: mk()(x))
P.keywords["y"] = 3.0
show("s3", lambda: mk()(x))
show("s4", lambda: mk()(x))
P.keywords["y"] = 5.0
show("s5", lambda: mk()(x))
