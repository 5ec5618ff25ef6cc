# Review 92 (rule tables): in B only, JAX's own batching rule of cos_p set for sin_p:
# vmap(sin) binds cos in B; the persisted key dropped the registries' epoch and kept
# only the program's own rules, so A's trace was served.
# alone: it writes a rule table
import os

from jax import lax
from jax._src.interpreters import batching

if os.environ["PHASE"] == "B":
    batching.fancy_primitive_batchers[lax.sin_p] = batching.fancy_primitive_batchers[lax.cos_p]


def f(a):
    return jax.vmap(jnp.sin)(a)


show("p1", lambda: jax.jit(f)(x))
