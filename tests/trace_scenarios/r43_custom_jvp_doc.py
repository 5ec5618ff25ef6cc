# Review 43 (cj_doc2): a custom_jvp object's __doc__, read by traced code, is keyed
# (it was left out of the walk as "never reaching the trace").
@jax.custom_jvp
def cf(x):
    return x


cf.defjvp(lambda p, t: (p[0], t[0]))
mk = lambda: jax.jit(lambda x: x * len(cf.__doc__ or ""))
for d in ("ab", "ab", "abcd"):
    cf.__doc__ = d
    show(f"doc{d}", lambda: mk()(x))
