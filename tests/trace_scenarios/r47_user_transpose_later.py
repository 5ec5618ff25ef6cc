# Review 47 (tp1): a user primitive's transpose rule reads a global; JAX runs it after the trace, on caches keyed by the jaxpr a reuse shares: traces binding a user primitive are not recorded.
from jax.extend.core import Primitive
from jax.interpreters import ad, mlir

K = 1.0
p = Primitive("r47scale")
p.def_impl(lambda a: a * 2.0)
p.def_abstract_eval(lambda a: a)
mlir.register_lowering(p, mlir.lower_fun(lambda a: a * 2.0, multiple_results=False))
ad.deflinear2(p, lambda ct, a: [ct * K])
mk = lambda: jax.jit(lambda x: p.bind(x))
ct = jnp.ones(3, jnp.float32)
for i in range(3):
    y, vf = jax.vjp(mk(), x)
    show(f"a{i}", lambda: vf(ct)[0])
y, vf = jax.vjp(mk(), x)
K = 5.0
show("b", lambda: vf(ct)[0])
K = 1.0
