# Review 28 (dc_eq): a false hit of snapshot cf8864b (plain stdlib modules reading frames or a module's namespace by name, getattr with a constant name, numpy print options), refused since.
import dataclasses, sys


def f(x):
    @dataclasses.dataclass
    class C:
        pass

    return x * C().__eq__(1)


for v in (2.0, 3.0):
    NotImplemented = v
    show(f"v{v}", lambda: jax.jit(lambda x: f(x))(x))
del NotImplemented
