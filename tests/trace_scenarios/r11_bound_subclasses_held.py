# `__subclasses__()` held as a value: a builtin method bound to a user class is keyed
# as ("B", name, type, the class), and the class's walk has no part that changes when
# a subclass is defined. The contract lists __subclasses__() (also "held as a value")
# as never reused.
class Base:
    pass


subs = Base.__subclasses__  # held, not named in the code that calls it
mk = lambda: jax.jit(lambda x: x * (1.0 + len(subs())))
show("no-subclass", lambda: mk()(x))


class A(Base):
    pass


show("one-subclass", lambda: mk()(x))
