# Review 73 (cc_eager): an eager jax.closure_convert of G (JAX's util.cache, no evictor) before its global changed: a re-created jit over a new, equal G' was served the stale converted trace. Recordings are made in a trace context of their own since.
# jax.closure_convert caches its trace in a util.cache (strong key, no evictor):
# pcache neither evicts nor lists it. An eager closure_convert of G at S=2, then S=5:
# a re-created jit over G records the stale converted trace; a new, equal G' is
# served it where stock traces fresh.
S = 2.0


def make_g():
    def g(a):
        return a * S

    return g


G = make_g()
jax.closure_convert(G, x)  # eager, made before pcache ever walks G
S = 5.0


def body(g, a):
    f, consts = jax.closure_convert(g, a)
    return f(a, *consts)


mk = lambda g: jax.jit(lambda a: body(g, a))
for i in range(3):
    mk(G)(x)  # (G itself: afresh where stock is stale, README)
for i in range(3):
    show(f"new{i}", lambda: mk(make_g())(x))
