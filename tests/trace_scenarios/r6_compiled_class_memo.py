"""A user class that looks like an extension type (no own methods, __module__ not an
imported module) when first met: judged library code for good, its attributes fixed."""


class Base:
    pass


class Cfg(Base):
    pass


Cfg.__module__ = "r6_not_imported"
mk = lambda: jax.jit(lambda v: v * getattr(Cfg, "scale", 1.0))
show("bare", lambda: mk()(x))
Cfg.scale = 3.0
show("scale3", lambda: mk()(x))
