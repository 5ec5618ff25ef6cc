# Review 98 (executable key): as r98_userprim_kw, the same sub-jaxpr object a lax.cond
# branch of global functions.
import functools
from jax import lax
from jax.extend.core import Primitive
from jax.interpreters import mlir

my_p = Primitive("r98_scale2")
my_p.def_abstract_eval(lambda a: a)
P = functools.partial(lax.mul, y=2.0)
mlir.register_lowering(my_p, mlir.lower_fun(P, multiple_results=False))


def br_a(a):
    return my_p.bind(a)


def br_b(a):
    return a


mk = lambda: jax.jit(lambda p, a: lax.cond(p, br_a, br_b, a))
show("s1", lambda: mk()(True, x))
show("s2", lambda: mk()(True, x))
P.keywords["y"] = 3.0
show("s3", lambda: mk()(True, x))
show("s4", lambda: mk()(True, x))
