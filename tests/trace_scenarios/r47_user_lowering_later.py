# Review 47 (lw1): the same with a user lowering rule and .trace() then .lower().
from jax.extend.core import Primitive
from jax.interpreters import mlir

K = 2.0
p = Primitive("r47low")
p.def_impl(lambda a: a * 2.0)
p.def_abstract_eval(lambda a: a)


def rule(ctx, a):
    return mlir.lower_fun(lambda a: a * K, multiple_results=False)(ctx, a)


mlir.register_lowering(p, rule)
mk = lambda: jax.jit(lambda x: p.bind(x))
for i in range(2):
    show(f"a{i}", lambda: mk()(x))
t = mk().trace(x)
K = 9.0
show("b", lambda: t.lower().compile()(x))
K = 2.0
t = mk().trace(x)
K = 9.0
show("c", lambda: t.lower().compile()(x))
K = 2.0
