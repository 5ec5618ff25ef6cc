# Review 17: a user class made to look like an extension's (no slots or dict, a module
# never imported, only C slot wrappers) was judged library code once and memoized;
# class attributes set later were never keyed.
class B(int):
    __slots__ = ()


del B.__slots__
B.__module__ = "not_a_module_xyz"
B.__neg__ = int.__neg__


def mk():
    return jax.jit(lambda x: x * getattr(B, "SCALE", 1.0))


show("a", lambda: mk()(x))
B.SCALE = 2.0
show("b", lambda: mk()(x))
B.SCALE = 3.0
show("c", lambda: mk()(x))
