# Review 96 (rules over data): JAX's own lower_fun over a partial of lax.add registered
# on neg_p; the partial's keywords dict changed in place between steps (an overridden
# rule is now walked like a user primitive's, and described afresh each time).
import functools
from jax import lax
from jax._src.interpreters import mlir
from jax._src.lax import lax as laxi

ORIG = mlir._lowerings[laxi.neg_p].rule
P = functools.partial(lax.add, y=2.0)
mlir.register_lowering(laxi.neg_p, mlir.lower_fun(P, multiple_results=False))


def mk():
    def body(a):
        return -a

    return jax.jit(body)


show("s1", lambda: mk()(x))
show("s2", lambda: mk()(x))
show("s3", lambda: mk()(x))
P.keywords["y"] = 5.0
show("s4", lambda: mk()(x))
show("s5", lambda: mk()(x))
mlir.register_lowering(laxi.neg_p, ORIG)
