# Review 102: an unusable donation warned on every step in stock; pcache stopped from the
# step whose lowering was an executable hit (the hit re-issued it unrecorded, so the
# served trace's lowering was taken as one that never warned).
import warnings

# an "always" filter set once; count the warnings each step shows
warnings.simplefilter("always")
shown = []
warnings.showwarning = lambda m, c, f, l, file=None, line=None: shown.append(str(m)[:60])
mk = lambda: jax.jit(lambda a, b: (a * b).sum(), donate_argnums=(0, 1))
for i in range(6):
    a = jnp.arange(3, dtype=jnp.float32) + i
    b = jnp.ones(3)
    n = len(shown)
    show(f"d{i}", lambda: mk()(a, b))
    print(i, "warnings this step", len(shown) - n, shown[n:])
warnings.showwarning = warnings._showwarning_orig
warnings.resetwarnings()
