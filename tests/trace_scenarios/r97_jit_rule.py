# Review 97 (executable key): a lowering rule of JAX's own code over the program's
# jit object with _fun and __wrapped__ deleted (its C++ object still calls the
# program's function): now a jit object's _fun must be what its C++ object holds
# attributes (_fun, __wrapped__) were removed: the C++ object still calls the program's code
from jax._src.interpreters import mlir
from jax import lax


def reg(c):
    j = jax.jit(lambda a: a * c)
    del j._fun, j.__wrapped__
    mlir.register_lowering(lax.neg_p, mlir.lower_fun(j, multiple_results=False))


ORIG = mlir._lowerings[lax.neg_p].rule
mk = lambda: jax.jit(lambda a: lax.neg(a))
reg(2.0)
for i in range(3):
    show(f"a{i}", lambda: mk()(x))
reg(5.0)
for i in range(3):
    show(f"b{i}", lambda: mk()(x))
mlir.register_lowering(lax.neg_p, ORIG)  # (the driver runs every scenario in one process)
