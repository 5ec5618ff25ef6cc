# Review 30 (sdisp2): a false hit of snapshot fecc7c5 (singledispatch evaluating string annotations, frozen dataclasses and metaclasses keyed without their class whole, user code given a library module's globals), refused since.
from __future__ import annotations
import jax, functools


def body(x):
    @functools.singledispatch
    def scale(v):
        return 1.0

    @scale.register
    def _(v: Num):
        return 2.0

    return x * scale(1.5)


mk = lambda: jax.jit(lambda x: body(x))
for t in (float, int):
    Num = t
    show(t.__name__, lambda: mk()(x))
