# Review 26 (imp_eval_nested): a false hit of snapshot 6ba78e3, refused since (imports, library modules reaching user state, the stdlib allowlist, __file__, Field kinds).
K = 1.0


def mk():
    def f(x):
        from builtins import eval as ev

        return x * ev("K")

    return jax.jit(f)


for k in (1.0, 2.0):
    K = k
    show(f"k{k}", lambda: mk()(x))
