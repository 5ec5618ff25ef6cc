# Review 26 (rl_main_cl): a false hit of snapshot 6ba78e3, refused since (imports, library modules reaching user state, the stdlib allowlist, __file__, Field kinds).
import rlcompleter

K = 1.0


def mk():
    m = rlcompleter
    return jax.jit(lambda x: x * m.__main__.K)


for k in (1.0, 2.0):
    K = k
    show(f"k{k}", lambda: mk()(x))
