# Review 96 (executable key): a program's lowering rule on neg_p whose class is named
# nanobind's nb_func and whose instance names a JAX module: described as JAX's C++ by
# those strings (now by nanobind's very type and where the name leads).
from jax._src.interpreters import mlir
from jax._src.lax import lax as laxi

S = [2.0]
ORIG = mlir._lowerings[laxi.neg_p].rule


class nb_func:
    def __call__(self, ctx, x, **params):
        return mlir.lower_fun(lambda y: [y * S[0]], multiple_results=True)(ctx, x)


nb_func.__module__ = "nanobind"
r = nb_func()
r.__module__ = "jax._src.lax.lax"
r.__qualname__ = "_neg_lower"
mlir.register_lowering(laxi.neg_p, r)


def mk():
    def body(a):
        return -a

    return jax.jit(body)


show("s1", lambda: mk()(x))
show("s2", lambda: mk()(x))
show("s3", lambda: mk()(x))
S[0] = 5.0
show("s4", lambda: mk()(x))
show("s5", lambda: mk()(x))
mlir.register_lowering(laxi.neg_p, ORIG)  # (one process runs them all)
