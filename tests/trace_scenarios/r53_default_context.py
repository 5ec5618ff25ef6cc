# Review 53 (defctx): decimal.DefaultContext, which decimal.Context() copies, changed between steps: in the host state since.
# decimal.DefaultContext (the template of decimal.Context()) changed between steps
import decimal

mk = lambda: jax.jit(lambda a: a * float(decimal.Context().prec))
show("s1", lambda: mk()(x))
decimal.DefaultContext.prec = 5
show("s2", lambda: mk()(x))
decimal.DefaultContext.prec = 28
