# Review 16: a weakref.proxy forwards __class__: isinstance says Enum, the real type is ProxyType (the member's class was never keyed).
import enum, weakref


class A(enum.Enum):
    X = 1

    def f(self):
        return 2.0


class B(enum.Enum):
    X = 1

    def f(self):
        return 3.0


P = weakref.proxy(A.X)
mk = lambda: jax.jit(lambda x: x * P.f())
show("a", lambda: mk()(x))
P = weakref.proxy(B.X)
show("b", lambda: mk()(x))
