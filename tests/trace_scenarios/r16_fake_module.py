# Review 16: an object whose __class__ says module and whose __dict__ is numpy's: taken for a library module.
import types


class Fake:
    @property
    def __class__(self):
        return types.ModuleType

    @property
    def __dict__(self):
        return np.__dict__

    __name__ = "numpy"
    scale = 2.0


CFG = Fake()
mk = lambda: jax.jit(lambda x: x * CFG.scale)
show("a", lambda: mk()(x))
Fake.scale = 3.0
show("b", lambda: mk()(x))
