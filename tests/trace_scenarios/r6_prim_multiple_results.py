"""A user primitive's multiple_results flag flipped between steps (not a rule)."""

from jax.extend.core import Primitive
from jax.interpreters import mlir

p = Primitive("r6_twice")
p.def_impl(lambda v: v * 2)


def _abs(v):
    return [v] if p.multiple_results else v


p.def_abstract_eval(_abs)
mlir.register_lowering(p, mlir.lower_fun(lambda v: v * 2, multiple_results=False))


def f(v):
    out = p.bind(v)
    return out[0] * 10 if isinstance(out, (list, tuple)) else out


mk = lambda: jax.jit(lambda v: f(v))
show("single", lambda: mk()(x))
p.multiple_results = True
show("multi", lambda: mk()(x))
