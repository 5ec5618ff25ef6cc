# Review 93 (executable key): JAX's own log rule registered for exp_p on the cpu table
# only (a key new to that table, which takes precedence over the default rule); the
# program's sigmoid lowers through logistic's lower_fun rule, which binds exp_p. The
# new entry was taken for a first registration, and the memory tier served the old
# executable.
from jax._src.interpreters import mlir
from jax._src.lax import lax as L

mk = lambda: jax.jit(lambda a: jax.nn.sigmoid(a))
for i in range(3):
    show(f"a{i}", lambda: mk()(x))
mlir.register_lowering(L.exp_p, mlir._lowerings[L.log_p].rule, platform="cpu")
try:
    for i in range(3):
        show(f"b{i}", lambda: mk()(x))
finally:
    del mlir._platform_specific_lowerings["cpu"][L.exp_p]  # (one process runs them all)
