# Review 30 (fntype): a false hit of snapshot fecc7c5 (singledispatch evaluating string annotations, frozen dataclasses and metaclasses keyed without their class whole, user code given a library module's globals), refused since.
import jax, types, os

src = lambda x: x * __import__("__main__").K
f = types.FunctionType(src.__code__, os.__dict__)
mk = lambda: jax.jit(lambda x: f(x))
for k in (1.0, 2.0):
    K = k
    show(f"k{k}", lambda: mk()(x))
