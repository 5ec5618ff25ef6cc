# Review 26 (file_spoof): a false hit of snapshot 6ba78e3, refused since (imports, library modules reaching user state, the stdlib allowlist, __file__, Field kinds).
__file__ = "/root/.pyenv/versions/3.11.7/lib/python3.11/spoof.py"
K = 1.0
mk = lambda: jax.jit(lambda x: x * K)
for k in (1.0, 2.0):
    K = k
    show(f"k{k}", lambda: mk()(x))
