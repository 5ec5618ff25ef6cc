# staticmethod/classmethod keyed only by the function they wrap ("SM", func):
# their own __dict__ (attributes set on the wrapper, Python >= 3.10) is not keyed.
def mk(k):
    sm = staticmethod(lambda v: v)
    sm.k = k
    return jax.jit(lambda x: sm(x) * sm.k)


show("a", lambda: mk(2.0)(x))
show("b", lambda: mk(3.0)(x))
