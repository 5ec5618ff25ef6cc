# Review 67 (copyreg3): copy.copy at trace time: the reducer registered with copyreg.pickle replaced between steps: never reused since.
import copy, copyreg


class C:
    def __init__(self, v):
        self.v = v


def red2(o):
    return (C, (2.0,))


def red3(o):
    return (C, (3.0,))


copyreg.pickle(C, red2)
mk = lambda: jax.jit(lambda a: a * copy.copy(C(1.0)).v)
show("s1", lambda: mk()(x))
copyreg.pickle(C, red3)
show("s2", lambda: mk()(x))
