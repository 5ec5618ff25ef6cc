# Review 73 (eqx_attr): as pw_attr through eqx.filter_jit (equinox's jit takes g as a static argument). Recordings are made in a trace context of their own since.
# pw_attr.py with equinox: eqx.filter_jit(g) nested in a jax.jit; equinox's jit of its
# own fun_wrapped takes g as a static argument (JAX's entry keyed first by fun_wrapped).
import equinox as eqx

S = 2.0


class Meta:
    pass


def make_g():
    def g(a):
        return a * S

    return g


G = make_g()
G.meta = Meta()
mk = lambda g: jax.jit(lambda a: eqx.filter_jit(g)(a) + 1.0)
show("first", lambda: mk(G)(x))
S = 5.0
G.meta = "v2"
for i in range(3):
    mk(G)(x)  # (G itself: afresh where stock is stale, README)
for i in range(3):
    show(f"new{i}", lambda: (lambda g: (setattr(g, "meta", "v2"), mk(g)(x))[1])(make_g()))
