# Review 96 (hooks): a copyreg reducer that is a bound method of a library object
# (collections.ChainMap) over the program's dict, changed between steps: a library
# object's fields were taken as the library's state.
import copy, copyreg, collections, dataclasses


@dataclasses.dataclass(frozen=True)
class Cfg:
    s: float


C = Cfg(1.0)
D = {C: (float, (2.0,))}
copyreg.dispatch_table[Cfg] = collections.ChainMap(D).get


def mk():
    def body(a):
        return a * copy.copy(C)

    return jax.jit(body)


show("s1", lambda: mk()(x))
show("s2", lambda: mk()(x))
show("s3", lambda: mk()(x))
D[C] = (float, (5.0,))
show("s4", lambda: mk()(x))
show("s5", lambda: mk()(x))
del copyreg.dispatch_table[Cfg]  # (the driver runs every scenario in one process)
