# Review 103: a lowering of the program's that raised (a user rule on tanh_p: the digest is
# not persistent) ran twice under pcache: the seam's except for its own key errors caught
# it and lowered again (the rule's warning and side effects twice).
import warnings
from jax._src.interpreters import mlir
from jax import lax

warnings.simplefilter("always")
shown = []
warnings.showwarning = lambda m, c, f, l, file=None, line=None: shown.append(
    f"{c.__name__}:{str(m)[:40]}"
)
orig_rule = mlir._lowerings[lax.tanh_p].rule
calls = [0]


def rule(ctx, a, **kw):
    calls[0] += 1
    warnings.warn("tanh rule ran")
    if ctx.avals_in[0].dtype == np.float16:
        raise ValueError("float16 tanh is not supported by this rule")
    return orig_rule(ctx, a, **kw)


mlir.register_lowering(lax.tanh_p, rule)
f = jax.jit(lambda a: jnp.tanh(a) * 2)
for i, arg in enumerate([x, x.astype(jnp.float16), x.astype(jnp.float16), x]):
    k, c = len(shown), calls[0]
    try:
        o = f(arg)
        print(i, "ok", np.asarray(o).tobytes().hex())
    except Exception as e:
        print(i, "EXC", type(e).__name__, str(e)[:80])
    print(i, "rule calls", calls[0] - c, "warnings", shown[k:])
mlir.register_lowering(lax.tanh_p, orig_rule)
warnings.showwarning = warnings._showwarning_orig
warnings.resetwarnings()
