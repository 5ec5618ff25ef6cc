"""A generic base parametrized by a config class (class Model(Base[Cfg])): the trace
finds the config class through __orig_bases__ and reads its attribute."""

from typing import Generic, TypeVar

T = TypeVar("T")


class Cfg:
    scale = 2.0


class Base(Generic[T]):
    @classmethod
    def cfg(cls):
        return cls.__orig_bases__[0].__args__[0]

    @classmethod
    def apply(cls, v):
        return v * cls.cfg().scale


class Model(Base[Cfg]):
    pass


mk = lambda: jax.jit(lambda v: Model.apply(v))
show("s=2", lambda: mk()(x))
Cfg.scale = 3.0
show("s=3", lambda: mk()(x))
