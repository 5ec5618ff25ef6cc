# Review 30 (sdisp): a false hit of snapshot fecc7c5 (singledispatch evaluating string annotations, frozen dataclasses and metaclasses keyed without their class whole, user code given a library module's globals), refused since.
import jax, functools


def body(x):
    @functools.singledispatch
    def g(v):
        return 1.0

    @g.register
    def _(v: "T"):
        return 2.0

    return x * g(1.5)


mk = lambda: jax.jit(lambda x: body(x))
for t in (float, int):
    T = t
    show(t.__name__, lambda: mk()(x))
