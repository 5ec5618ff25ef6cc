# Review 102: a recording traces inner jits afresh (jnp.add's), so a rank-promotion warning
# JAX's cache skipped came again on every recording attempt (steps 1 and 3). Now once
# (step 1, documented); the lines compared here are the results.
import warnings

warnings.simplefilter("always")
n = []
warnings.showwarning = lambda m, c, f, l, file=None, line=None: n.append(str(m)[:50])
jax.config.update("jax_numpy_rank_promotion", "warn")
mk = lambda: jax.jit(lambda a, b: a + b)
for i in range(5):
    k = len(n)
    show(f"s{i}", lambda: mk()(x, jnp.ones((2, 3))))
    print(i, "warned", bool(n[k:]) if i != 1 else "(step 1: once more with pcache)")
jax.config.update("jax_numpy_rank_promotion", "allow")
warnings.showwarning = warnings._showwarning_orig
warnings.resetwarnings()
