# Review 54 (enum_payload): an enum member whose int payload (set by a custom __new__) is not its _value_: the payload is keyed since.
# enum member whose int payload differs from its _value_ (custom __new__); payload from a class-body constant
import enum, os

S = 5 if os.environ["PHASE"] == "A" else 7


class E(int, enum.Enum):
    def __new__(cls, v, s):
        obj = int.__new__(cls, s)
        obj._value_ = v
        return obj

    A = (1, S)


del S


def f(a):
    return a * int(E.A)


show("e1", lambda: jax.jit(f)(x))
