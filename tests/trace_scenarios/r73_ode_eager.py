# Review 73 (ode_eager): as cc_eager, through jax.experimental.ode.odeint (closure_convert of the user's ODE function). Recordings are made in a trace context of their own since.
# jax.experimental.ode.odeint closure-converts the user's ODE function (util.cache, no
# evictor): an eager odeint at S=2, then S=5, then re-created jits.
from jax.experimental.ode import odeint

S = 2.0


def make_g():
    def g(y, t):
        return -S * y

    return g


G = make_g()
t = jnp.array([0.0, 0.5])
y0 = jnp.ones(2)
odeint(G, y0, t)  # eager
S = 5.0
mk = lambda g: jax.jit(lambda y: odeint(g, y, t)[-1])
for i in range(3):
    mk(G)(y0)  # (G itself: afresh where stock is stale, README)
for i in range(3):
    show(f"new{i}", lambda: mk(make_g())(y0))
