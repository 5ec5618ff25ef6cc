# Review 111 (s1_flatten_reentry): a user pytree node whose flatten runs grad(cond(g)),
# g the very function the jit wraps: it runs inside _trace_for_jit, between pcache's
# serve() and JAX's pe.trace_to_jaxpr, and cond's pe.trace_to_jaxpr(g, avals) took the
# serve (a stored jaxpr with stand-ins, then differentiated: StandInCalled). Now only
# _trace_for_jit's own call takes it.  # alone  # served
import jax
from jax import lax
import jax.numpy as jnp

show = globals()["show"]
x = globals()["x"]


@jax.custom_jvp
def soft(v):
    return jnp.log1p(jnp.exp(v))


soft.defjvp(lambda p, t: (soft(p[0]), t[0] * 7.0))


class Box:
    def __init__(self, v):
        self.v = v


class Plain:
    def __init__(self, v):
        self.v = v


def g(b):
    return soft(b.v * 2.0)


def _flat(b):
    jax.grad(lambda z: jnp.sum(lax.cond(True, g, g, Plain(z))))(b.v)
    return (b.v,), None


jax.tree_util.register_pytree_node(Box, _flat, lambda _, c: Box(c[0]))
jax.tree_util.register_pytree_node(Plain, lambda b: ((b.v,), None), lambda _, c: Plain(c[0]))

jb = jax.jit(g)
show("box", lambda: jb(Box(x)))
show("box-again", lambda: jb(Box(x + 1.0)))
