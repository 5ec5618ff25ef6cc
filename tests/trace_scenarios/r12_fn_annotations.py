# A function's __annotations__ are not in its key (same code, no cells), but library
# code reads them while tracing: functools.singledispatch's register(fn) dispatches
# on the annotation. make(int) and make(str) get one key.
import functools


def make(T):
    def h(a: T):
        return 2.0

    return h


def mk(h):
    def body(v):
        sd = functools.singledispatch(lambda a: 1.0)
        sd.register(h)
        return v * sd(3)

    return jax.jit(body)


show("int", lambda: mk(make(int))(x))
show("str", lambda: mk(make(str))(x))
