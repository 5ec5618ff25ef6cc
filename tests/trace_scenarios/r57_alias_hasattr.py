# Review 57 (alias_hasattr): a global library module bound to a local, then hasattr on the local: the read continues the global's chain since.
def f(a):
    m = jax.experimental
    return a * (2.0 if hasattr(m, "layout") else 3.0)


mk = lambda: jax.jit(lambda a: f(a))
show("s1", lambda: mk()(x))
show("s1b", lambda: mk()(x))
import jax.experimental.layout

show("s2", lambda: mk()(x))
