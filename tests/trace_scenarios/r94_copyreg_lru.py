# Review 94 (copyreg, lru_cache): a copyreg reducer of the program's wrapped in
# functools.lru_cache with __wrapped__ deleted: the wrapper is a C object keeping the
# function where no Python code reads it, and the hook check took an instance of a
# library class holding nothing in its __dict__ for the library's.
import copy
import copyreg
import functools


class P:
    def __init__(self, v):
        self.v = v


SCALE = 2.0


def red(p):
    return (P, (p.v * SCALE,))


w = functools.lru_cache(maxsize=None)(red)
del w.__wrapped__
copyreg.pickle(P, w)
mk = lambda: jax.jit(lambda a: a * copy.copy(P(1.0)).v)
for i in range(4):
    SCALE = float(i + 2)
    w.cache_clear()
    show(f"s{i}", lambda: mk()(x))
del copyreg.dispatch_table[P]  # (the driver runs every scenario in one process)
