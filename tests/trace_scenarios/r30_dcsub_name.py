# Review 30 (dcsub_name): a false hit of snapshot fecc7c5 (singledispatch evaluating string annotations, frozen dataclasses and metaclasses keyed without their class whole, user code given a library module's globals), refused since.
import jax, dataclasses


@dataclasses.dataclass(frozen=True)
class D:
    a: float


class E(D):
    pass


e = E(1.0)
mk = lambda: jax.jit(lambda x: x * len(type(e).__name__))
for n in ("A", "BB"):
    E.__name__ = n
    show(n, lambda: mk()(x))
