# Review 89 (copyreg, partial): a copyreg reducer registered as functools.partial of a
# user function reading a global; copy.copy runs it while tracing. The hook check
# looked at the partial's type (a library's) and not at what it calls.
import copy
import copyreg
import functools


class P:
    def __init__(self, v):
        self.v = v


SCALE = 2.0


def red(p):
    return (P, (p.v * SCALE,))


copyreg.pickle(P, functools.partial(red))
mk = lambda: jax.jit(lambda a: a * copy.copy(P(1.0)).v)
for i in range(4):
    SCALE = float(i + 2)
    show(f"s{i}", lambda: mk()(x))
del copyreg.dispatch_table[P]  # (the driver runs every scenario in one process)
