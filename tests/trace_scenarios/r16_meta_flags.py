# Review 16: a metaclass __flags__ property made a user class look like a static C type (library code).
class Meta(type):
    @property
    def __flags__(cls):
        return 0


class C(metaclass=Meta):
    scale = 2.0


mk = lambda: jax.jit(lambda x: x * C.scale)
show("a", lambda: mk()(x))
C.scale = 3.0
show("b", lambda: mk()(x))
