# A user metaclass whose __eq__ says every class is equal and whose __hash__ is
# float's: a type-keyed table lookup took instances for floats.
class Meta(type):
    def __eq__(cls, other):
        return True

    def __hash__(cls):
        return hash(float)


class C(metaclass=Meta):
    def __init__(self):
        self.k = 2.0

    def __float__(self):
        return 1.0

    def __ne__(self, other):
        return False


c = C()
mk = lambda: jax.jit(lambda x: x * c.k)
show("a", lambda: mk()(x))
show("a2", lambda: mk()(x))
c.k = 3.0
show("b", lambda: mk()(x))
