# Review 39 (repr1): reprlib.aRepr.maxstring set between steps: reprlib is no longer a plain module since.
import reprlib

mk = lambda: jax.jit(lambda x: x * float(len(reprlib.repr("abcdefghijklmnopqrstuvwxyz" * 3))))
for m in (10, 10, 40, 40):
    reprlib.aRepr.maxstring = m
    show(f"m{m}", lambda: mk()(x))
reprlib.aRepr.maxstring = 30
