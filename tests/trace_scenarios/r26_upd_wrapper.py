# Review 26 (upd_wrapper): a false hit of snapshot 6ba78e3, refused since (imports, library modules reaching user state, the stdlib allowlist, __file__, Field kinds).
import functools, types

K = 1.0


def body(x):
    n = chr(95) * 2 + "glob" + "als" + chr(95) * 2
    d = {}
    ns = types.SimpleNamespace(**{n: d})
    functools.update_wrapper(ns, body, assigned=(), updated=(n,))
    return x * d["K"]


mk = lambda: jax.jit(lambda x: body(x))
for k in (1.0, 2.0):
    K = k
    show(f"k{k}", lambda: mk()(x))
