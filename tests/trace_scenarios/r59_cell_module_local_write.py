# Review 59 (a library module in a closure cell, bound to a local, an existing attribute rebound): a library module in a closure cell, bound to a local, an attribute rebound through it: never reused since (a local holding a cell's value is not fresh).
import textwrap

textwrap.LAST = 0.0


def mk(mod):
    def f(a):
        m = mod
        m.LAST = 5.0
        return a * 2

    return jax.jit(f)


for i in range(3):
    textwrap.LAST = 0.0
    show(f"r{i}", lambda: mk(textwrap)(x))
    show(f"LAST{i}", lambda: np.float32(textwrap.LAST))
