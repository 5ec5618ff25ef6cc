# Review 57 (cell_hasattr2): a library package held in a closure cell, hasattr on its submodule: a module value is keyed with its submodules' names since.
def make(m):
    return lambda a: a * (2.0 if hasattr(m.experimental, "serialize_executable") else 3.0)


mk = lambda: jax.jit(make(jax))
show("s1", lambda: mk()(x))
show("s1b", lambda: mk()(x))
import jax.experimental.serialize_executable

show("s2", lambda: mk()(x))
