# Review 112 (t2_pending_serve, t4_pending_static): a dispatch nested in an outer call's
# argument flatten was served, then raised in its own flatten before its trace: its
# pending serve was taken by the outer call's `_trace_for_jit` (same function, same
# avals): `Traced.jaxpr` held stand-ins (StandInCalled under grad); and, without custom
# rules, an outer call with another static argument got wrong numbers, kept in the jit
# object's fast path. A serve is now bound to the `_infer_params` frame it was prepared
# in.  # alone  # served
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


def g(p, k=2.0):
    return jnp.sum(p.v * k)


jf, jg = jax.jit(f), jax.jit(g)


def nested(j=jf):
    try:
        float(j(P(x, hook=Bomb() if PH == "B" else None)))
    except Boom:
        pass


LOCK = threading.Lock()
t = jf.trace(Q(x, LOCK, hook=nested))
show("trace-grad", lambda: jax.grad(lambda v: jax.extend.core.jaxpr_as_fun(t.jaxpr)(v)[0])(x))
show("trace-jaxpr-eqns", lambda: jnp.float32(len(t.jaxpr.eqns)))
show("lower", lambda: jnp.float32(len(jf.lower(Q(x, LOCK, hook=nested)).as_text()) > 0))
show("dispatch", lambda: jf(Q(x, LOCK, hook=nested)))
show("grad-after", lambda: jax.grad(lambda v: jf(Q(v, LOCK)))(x))
# (how often the flattens ran differs: a served dispatch holding stand-ins fills no JAX
# cache entry, so a later `.trace()` traces, and flattens, afresh: README)
# (without custom rules: the outer call, of the same function, has a static argument)
jk = jax.jit(g, static_argnums=1)
show("outer-static-dispatch", lambda: jk(Q(x, LOCK, hook=lambda: nested(jg)), 7.0))
show(
    "outer-static-trace-eval",
    lambda: jax.extend.core.jaxpr_as_fun(jk.trace(Q(x, LOCK, hook=lambda: nested(jg)), 11.0).jaxpr)(
        x
    )[0],
)
show("again", lambda: jk(Q(x, LOCK), 7.0))
