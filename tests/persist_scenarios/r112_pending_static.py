# Review 112 (t4_pending_static): as r112_pending_serve, without custom rules: the
# outer call (another static argument) took the pending serve: wrong numbers, kept in
# the jit object's fast path. Fixed by binding a serve to its `_infer_params` frame.
# alone  # served
# (t2 without custom rules: the outer, of the same function, has another static argument)
# A pending serve left by a dispatch that raised after pcache prepared it (its argument's
# flatten raised in its _trace_for_jit), nested in the argument flatten of an outer
# top-level `.trace()` / dispatch of the same function (the outer's key refused in
# process: a lock in its tree's aux data, so it has no recording context): does the
# outer's trace_to_jaxpr take the stored jaxpr, stand-ins and all?
import os
import threading
import jax
import jax.extend
import jax.numpy as jnp

show = globals()["show"]
x = globals()["x"]
PH = os.environ["PHASE"]


class Boom(Exception):
    pass


@jax.custom_jvp
def soft(v):
    return jnp.log1p(jnp.exp(v))


soft.defjvp(lambda p, t: (soft(p[0]), t[0] * 3.0))


class Bomb:
    """Raises on its 4th call: the 4th flatten of a dispatch's argument is in _trace_for_jit."""

    def __init__(self):
        self.n = 0

    def __call__(self):
        self.n += 1
        if self.n == 4:
            raise Boom()


class P:
    def __init__(self, v, hook=None):
        self.v, self.hook = v, hook


def _flat(p):
    if p.hook is not None:
        p.hook()
    return (p.v,), None


jax.tree_util.register_pytree_node(P, _flat, lambda aux, ch: P(ch[0]))


class Q:
    def __init__(self, v, aux, hook=None):
        self.v, self.aux, self.hook = v, aux, hook


def _qflat(q):
    if q.hook is not None:
        q.hook()
    return (q.v,), q.aux


jax.tree_util.register_pytree_node(Q, _qflat, lambda aux, ch: Q(ch[0], aux))


def f(p, k=2.0):
    return jnp.sum(p.v * k)


jf = jax.jit(f)
LOG = []


def nested():
    try:
        LOG.append(float(jf(P(x, hook=Bomb() if PH == "B" else None))))
    except Boom:
        LOG.append(-1.0)


LOCK = threading.Lock()
jk = jax.jit(f, static_argnums=1)
show("outer-static-dispatch", lambda: jk(Q(x, LOCK, hook=nested), 7.0))
show(
    "outer-static-trace-eval",
    lambda: jax.extend.core.jaxpr_as_fun(jk.trace(Q(x, LOCK, hook=nested), 11.0).jaxpr)(x)[0],
)
show("again", lambda: jk(Q(x, LOCK), 7.0))
show("log", lambda: jnp.asarray(LOG, dtype=jnp.float32))
