# Review 73 (pw_attr): as pw_hidden, G's first trace unkeyed because G held an attribute no key walks. Recordings are made in a trace context of their own since.
# As pw_hidden.py, without enable_checks: the first trace of G happens while G holds an
# attribute no key can walk (so pcache keys nothing and notes nothing of G); then the
# attribute and the global G reads change. Inner trace cached under jit(_piecewise).
S = 2.0


class Meta:  # a plain mutable object: no reuse while G holds it
    pass


def make_g():
    def g(a):
        return a * S

    return g


def h(a):
    return a - 10.0


G = make_g()
G.meta = Meta()
mk = lambda g: jax.jit(lambda a: jnp.piecewise(a, [a < 5], [g, h]))
show("first", lambda: mk(G)(x))
S = 5.0
G.meta = "v2"
for i in range(3):
    mk(G)(x)  # (G itself: afresh where stock is stale, README)
for i in range(3):
    show(f"new{i}", lambda: (lambda g: (setattr(g, "meta", "v2"), mk(g)(x))[1])(make_g()))
