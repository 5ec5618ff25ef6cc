# Review 43 (jit_doc): an attribute set on a global jit object's instance dict
# shadows the class's (``__doc__``, a method): guarded by value, not taken as the
# jit object's own.
def h(x):
    return x


g = jax.jit(h)
mk = lambda: jax.jit(lambda x: g(x) * len(g.__doc__ or ""))
for d in ("ab", "ab", "abcd"):
    g.__doc__ = d
    show(f"doc{d}", lambda: mk()(x))
