# Review 30 (dcsub_meta): a false hit of snapshot fecc7c5 (singledispatch evaluating string annotations, frozen dataclasses and metaclasses keyed without their class whole, user code given a library module's globals), refused since.
import jax, dataclasses


class M(type):
    pass


class M2(M):
    @property
    def X(cls):
        return K


@dataclasses.dataclass(frozen=True)
class D(metaclass=M):
    a: float


class E(D, metaclass=M2):
    pass


e = E(1.0)
mk = lambda: jax.jit(lambda x: x * type(e).X)
for k in (1.0, 2.0):
    K = k
    show(f"k{k}", lambda: mk()(x))
