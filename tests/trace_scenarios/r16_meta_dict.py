# Review 16: a metaclass __dict__ property hid the class attributes from the key.
class Meta(type):
    @property
    def __dict__(cls):
        return {}


class C(metaclass=Meta):
    scale = 2.0


mk = lambda: jax.jit(lambda x: x * C.scale)
show("a", lambda: mk()(x))
C.scale = 3.0
show("b", lambda: mk()(x))
