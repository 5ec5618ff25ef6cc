# Review 16: a metaclass __mro__ property hid a base class from the key.
class Meta(type):
    @property
    def __mro__(cls):
        return (cls, object)


class B:
    scale = 2.0


class C(B, metaclass=Meta):
    pass


mk = lambda: jax.jit(lambda x: x * C.scale)
show("a", lambda: mk()(x))
B.scale = 3.0
show("b", lambda: mk()(x))
