# Review 26 (imp_attrgetter): a false hit of snapshot 6ba78e3, refused since (imports, library modules reaching user state, the stdlib allowlist, __file__, Field kinds).
import doctest

K = 1.0


def mk():
    def f(x):
        from operator import attrgetter as A
        from doctest import _normalize_module as nm

        return x * A("K")(nm("__main__"))

    return jax.jit(f)


for k in (1.0, 2.0):
    K = k
    show(f"k{k}", lambda: mk()(x))
