# Review 112 (t2_pending_serve): a dispatch nested in an outer `.trace()`'s argument
# flatten was served, then raised in its own flatten before its trace: its pending
# serve was taken by the outer call's `_trace_for_jit` (same function, same avals), so
# `Traced.jaxpr` held stand-ins (StandInCalled under grad). A serve is now bound to
# the `_infer_params` frame it was prepared in.  # alone  # served
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


def f(p):
    return jnp.sum(soft(p.v * 2.0))


jf = jax.jit(f)
LOG = []


def nested():
    try:
        LOG.append(float(jf(P(x, hook=Bomb() if PH == "B" else None))))
    except Boom:
        LOG.append(-1.0)


LOCK = threading.Lock()
t = jf.trace(Q(x, LOCK, hook=nested))
show("trace-grad", lambda: jax.grad(lambda v: jax.extend.core.jaxpr_as_fun(t.jaxpr)(v)[0])(x))
show("trace-jaxpr-eqns", lambda: jnp.float32(len(t.jaxpr.eqns)))
show("lower", lambda: jnp.float32(len(jf.lower(Q(x, LOCK, hook=nested)).as_text()) > 0))
show("dispatch", lambda: jf(Q(x, LOCK, hook=nested)))
show("grad-after", lambda: jax.grad(lambda v: jf(Q(v, LOCK)))(x))
# (how often the flattens ran differs: a served dispatch holding stand-ins fills no JAX
# cache entry, so a later `.trace()` traces, and flattens, afresh: README)
