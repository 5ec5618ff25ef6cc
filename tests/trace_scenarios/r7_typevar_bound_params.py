"""A generic class whose type parameter is bound to a config class
(T = TypeVar("T", bound=Cfg)); the trace reads the bound through __parameters__."""

from typing import Generic, TypeVar


class Cfg:
    scale = 2.0


T = TypeVar("T", bound=Cfg)


class Model(Generic[T]):
    @classmethod
    def apply(cls, v):
        return v * cls.__parameters__[0].__bound__.scale


mk = lambda: jax.jit(lambda v: Model.apply(v))
show("s=2", lambda: mk()(x))
Cfg.scale = 3.0
show("s=3", lambda: mk()(x))
