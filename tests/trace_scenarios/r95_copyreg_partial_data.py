# Review 95 (hooks): a copyreg reducer functools.partial(operator.getitem, D) over a
# program's dict D changed in place between steps (a builtin bound to the program's data
# was the program's; the same through a partial was not).
import copy, copyreg, functools, dataclasses, operator


@dataclasses.dataclass(frozen=True)
class Box:
    v: float


B = Box(1.0)
D = {}
copyreg.pickle(Box, functools.partial(operator.getitem, D))
mk = lambda: jax.jit(lambda a: a * copy.copy(B))
for i in range(4):
    D[B] = (float, (str(float(i + 2)),))
    show(f"s{i}", lambda: mk()(x))
del copyreg.dispatch_table[Box]
