# Review 28 (dc_initvar): a false hit of snapshot cf8864b (plain stdlib modules reading frames or a module's namespace by name, getattr with a constant name, numpy print options), refused since.
import dataclasses


def f(x):
    C = dataclasses.make_dataclass("C", [("a", "Q")], namespace={"__module__": "__main__"})
    return x * float(len(dataclasses.fields(C)))


for q in (int, dataclasses.InitVar):
    Q = q
    show(f"q{q.__name__}", lambda: jax.jit(lambda x: f(x))(x))
