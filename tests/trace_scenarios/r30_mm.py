# Review 30 (mm): a false hit of snapshot fecc7c5 (singledispatch evaluating string annotations, frozen dataclasses and metaclasses keyed without their class whole, user code given a library module's globals), refused since.
import jax


class MM(type):
    @property
    def X(cls):
        return K


class M(type, metaclass=MM):
    pass


class C(metaclass=M):
    pass


mk = lambda: jax.jit(lambda x: x * type(C).X)
for k in (1.0, 2.0):
    K = k
    show(f"k{k}", lambda: mk()(x))
