# Review 26 (cls_spoof): a false hit of snapshot 6ba78e3, refused since (imports, library modules reaching user state, the stdlib allowlist, __file__, Field kinds).
import rlcompleter


class C:
    k = 1.0


C.__module__ = "rlcompleter"
C.__qualname__ = "__main__.C"
mk = lambda: jax.jit(lambda x: x * C.k)
for k in (1.0, 2.0):
    C.k = k
    show(f"k{k}", lambda: mk()(x))
