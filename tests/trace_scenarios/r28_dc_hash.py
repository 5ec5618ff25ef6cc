# Review 28 (dc_hash): a false hit of snapshot cf8864b (plain stdlib modules reading frames or a module's namespace by name, getattr with a constant name, numpy print options), refused since.
import dataclasses


def f(x):
    @dataclasses.dataclass(unsafe_hash=True)
    class C:
        pass

    return x * float(C().__hash__())


for v in (1, 2):
    hash = (lambda t: 1) if v == 1 else (lambda t: 2)
    show(f"h{v}", lambda: jax.jit(lambda x: f(x))(x))
