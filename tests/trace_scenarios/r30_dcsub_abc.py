# Review 30 (dcsub_abc): a false hit of snapshot fecc7c5 (singledispatch evaluating string annotations, frozen dataclasses and metaclasses keyed without their class whole, user code given a library module's globals), refused since.
import jax, dataclasses, abc


@dataclasses.dataclass(frozen=True)
class D:
    a: float


class E(D, metaclass=abc.ABCMeta):
    pass


e = E(1.0)
mk = lambda: jax.jit(lambda x: x * (2.0 if isinstance(1.5, type(e)) else 1.0))
show("a", lambda: mk()(x))
E.register(float)
show("b", lambda: mk()(x))
