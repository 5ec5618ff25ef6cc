"""A class attribute under a name the class walk treats as bookkeeping (__slots__)."""


class C:
    pass


C.__slots__ = (1.0,)
mk = lambda: jax.jit(lambda v: v * len(C.__slots__))
show("one", lambda: mk()(x))
C.__slots__ = (1.0, 2.0)
show("two", lambda: mk()(x))
