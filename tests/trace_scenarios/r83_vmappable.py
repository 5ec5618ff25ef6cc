# Review 83 (vmappable): a type of the program's registered with
# batching.register_vmappable, whose to_elt handler reads a global; the traced function
# vmaps over an instance of it. batching's handler tables were not among those checked.
from jax._src.interpreters import batching


class Box:
    def __init__(self, v):
        self.v = v

    @property
    def shape(self):
        return self.v.shape


G = 2.0


def to_elt(cont, get_idx, b, spec):
    return Box(cont(b.v * G, spec))


def from_elt(cont, size, b, spec):
    return Box(cont(size, b.v, spec))


batching.register_vmappable(Box, int, int, to_elt, from_elt, None)
mk = lambda: jax.jit(lambda a: jax.vmap(lambda b: b.v + 1.0)(Box(a)))
for i in range(3):
    show(f"a{i}", lambda: mk()(x))
G = 5.0
for i in range(3):
    show(f"b{i}", lambda: mk()(x))
for table in (batching.vmappables, batching.to_elt_handlers, batching.from_elt_handlers):
    del table[Box]  # (the driver runs every scenario in one process)
