# Review 57 (imp_hasattr3): hasattr one level below a module imported inside the function: a read through the local an import bound is guarded as its chain since.
def f(a):
    import jax

    return a * (2.0 if hasattr(jax.experimental, "custom_partitioning") else 3.0)


mk = lambda: jax.jit(lambda a: f(a))
show("s1", lambda: mk()(x))
show("s1b", lambda: mk()(x))
import jax.experimental.custom_partitioning

show("s2", lambda: mk()(x))
