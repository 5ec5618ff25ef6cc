class C:
    p = property(lambda s: 1.0, doc="2.0")


mk = lambda: jax.jit(lambda v: v * float(C.p.__doc__))
show("doc2", lambda: mk()(x))
C.p = property(C.p.fget, doc="3.0")  # same getter, another doc
show("doc3", lambda: mk()(x))
