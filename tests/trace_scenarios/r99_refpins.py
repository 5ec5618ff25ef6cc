# Review 99 (executable key): jax_refs_to_pins, read where JAX lowers a jit (Refs
# discharged), in neither JAX's trace context nor the key: the memory tier served the
# program lowered under the other value (stock raises with it on).
def f(a):
    r = jax.new_ref(a)
    r[...] = r[...] * 2
    return r[...]


mk = lambda: jax.jit(lambda a: f(a))
for i, flag in enumerate([False, False, False, True, True, False]):
    jax.config.update("jax_refs_to_pins", flag)
    show(f"s{i}-{flag}", lambda: mk()(x))
