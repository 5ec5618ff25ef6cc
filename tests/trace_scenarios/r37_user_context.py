# Review 37 (userctx3): a user context (jax.make_user_context) holding frozenset({0.0}) then frozenset({-0.0}), read through JAX's trace context: a user context's value only by an exact encoding since.
from jax._src import config as C

ctx = jax.make_user_context(None)
I = len(C.trace_context_names()) - 1  # the new context's slot (the last)
mk = lambda: jax.jit(lambda a: a * next(iter(C.trace_context()[I])))
for v in (frozenset({0.0}), frozenset({-0.0})):
    with ctx(v):
        show(f"v{v}", lambda: mk()(x))
