# Review 41 (nan_const_in): a global NaN that is (A) or is not (B) the very NaN constant of the traced code (G in (n,) tests identity first): persisted traces refuse a NaN's identity since.
import os


def f(a):
    n = 1e400 - 1e400
    return a * (2.0 if G in (n,) else 3.0)


G = f.__code__.co_consts[1] if os.environ.get("PHASE") == "A" else float("inf") - float("inf")
show("nan", lambda: jax.jit(f)(x))
