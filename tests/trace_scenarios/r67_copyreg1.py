# Review 67 (copyreg1): copy.copy at trace time runs a reducer registered with copyreg (not walked?): never reused since.
import copy, copyreg

SCALE = 2.0


class C:
    def __init__(self, v):
        self.v = v


def red(o):
    return (C, (SCALE,))


copyreg.pickle(C, red)


def body(a):
    return a * copy.copy(C(1.0)).v


mk = lambda: jax.jit(lambda a: body(a))
show("s1", lambda: mk()(x))
SCALE = 3.0
show("s2", lambda: mk()(x))
