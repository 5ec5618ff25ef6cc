# Allowlisted values the walk encodes without numbering their identity (operator
# getters, staticmethod objects): `==`/set/dict compare them by identity, so "the same
# getter twice" and "two equal getters" get one key.
from operator import itemgetter

mk = lambda gs: jax.jit(lambda v: v * len(set(gs)))
g = itemgetter(0)
show("shared", lambda: mk([g, g])(x))
show("distinct", lambda: mk([itemgetter(0), itemgetter(0)])(x))


def f(v):
    return v


s = staticmethod(f)
mk2 = lambda ss: jax.jit(lambda v: v * len(set(ss)))
show("sm_shared", lambda: mk2([s, s])(x))
show("sm_distinct", lambda: mk2([staticmethod(f), staticmethod(f)])(x))
