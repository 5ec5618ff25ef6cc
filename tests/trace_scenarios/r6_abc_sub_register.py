"""isinstance against a user ABC answers through its subclasses' registries too
(ABCMeta.__subclasscheck__ recurses into cls.__subclasses__()); only the ABC's own
registry is keyed."""

import abc


class Base(abc.ABC):
    pass


class Sub(Base):
    pass


mk = lambda: jax.jit(lambda v: v * (3.0 if isinstance(2.0, Base) else 2.0))
show("unregistered", lambda: mk()(x))
Sub.register(float)
show("registered on Sub", lambda: mk()(x))
