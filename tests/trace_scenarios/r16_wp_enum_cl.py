# Review 16: the same, the proxy held in a closure.
import enum, weakref


class A(enum.Enum):
    X = 1

    def f(self):
        return 2.0


class B(enum.Enum):
    X = 1

    def f(self):
        return 3.0


mk = lambda p: jax.jit(lambda x: x * p.f())
show("a", lambda: mk(weakref.proxy(A.X))(x))
show("b", lambda: mk(weakref.proxy(B.X))(x))
