# Review 73 (pw_hidden): jnp.piecewise's inner jit keyed first by _piecewise, the user's branch a static argument, traced under enable_checks (no key walked): its stale inner trace was recorded and served to a new, equal G'. Recordings are made in a trace context of their own since.
# jnp.piecewise caches its branches' trace under jit(_piecewise) with the branches as a
# static argument: an entry keyed first by _piecewise, not by the user's function.
# A trace of G made in a call pcache does not key (under enable_checks), then G's
# global changes; a re-created jit over G records that stale inner trace, and a new,
# equal G' is served it where stock traces fresh.
S = 2.0


def make_g():
    def g(a):
        return a * S

    return g


def h(a):
    return a - 10.0


G = make_g()
with jax.enable_checks(True):
    show("hidden", lambda: jnp.piecewise(x, [x < 5], [G, h]))
S = 5.0
mk = lambda g: jax.jit(lambda a: jnp.piecewise(a, [a < 5], [g, h]))
for i in range(3):
    mk(G)(x)  # (G itself: afresh where stock is stale, README)
for i in range(3):
    show(f"new{i}", lambda: mk(make_g())(x))
