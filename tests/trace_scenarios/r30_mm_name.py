# Review 30 (mm_name): a false hit of snapshot fecc7c5 (singledispatch evaluating string annotations, frozen dataclasses and metaclasses keyed without their class whole, user code given a library module's globals), refused since.
import jax


class M(type):
    pass


class C(metaclass=M):
    pass


mk = lambda: jax.jit(lambda x: x * len(type(C).__name__))
for n in ("A", "BB"):
    M.__name__ = n
    show(n, lambda: mk()(x))
