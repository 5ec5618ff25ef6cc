"""A scenario of the second outside review of trace reuse (see test_trace_review.py)."""

from jax.tree_util import Partial

S = 2.0


def act(v, w):
    return v * w * S


mk = lambda: jax.jit(lambda f, v: f(v))
show("S=2", lambda: mk()(Partial(act, jnp.ones(3)), x))
S = 3.0
show("S=3", lambda: mk()(Partial(act, jnp.ones(3)), x))
