# Review 95 (hooks): a copyreg reducer that is a program's subclass of functools.partial
# overriding __call__ (reading a global): the hook check read the partial's fields and
# never asked whose class it is.
import copy, copyreg, functools, dataclasses


@dataclasses.dataclass(frozen=True)
class Box:
    v: float


G = 2.0


class P(functools.partial):
    def __call__(self, obj):
        return (Box, (G,))


copyreg.pickle(Box, P(int))
B = Box(1.0)
mk = lambda: jax.jit(lambda a: a * copy.copy(B).v)
for i in range(4):
    G = float(i + 2)
    show(f"s{i}", lambda: mk()(x))
del copyreg.dispatch_table[Box]  # (the driver runs every scenario in one process)
