# Review 26 (imp_eval): a false hit of snapshot 6ba78e3, refused since (imports, library modules reaching user state, the stdlib allowlist, __file__, Field kinds).
K = 1.0


def body(x):
    import builtins as b

    return x * b.eval("K")


mk = lambda: jax.jit(lambda x: body(x))
for k in (1.0, 2.0):
    K = k
    show(f"k{k}", lambda: mk()(x))
