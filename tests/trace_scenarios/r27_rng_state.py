# Review 27: lax.rng_uniform draws from a generator XLA seeds per compile; a recreated jit must get its own executable (stock compiles each afresh).
# ruff: noqa: E731
mk = lambda: jax.jit(lambda a: a + jax.lax.rng_uniform(0.0, 1.0, (3,)))
f = mk()
show("a", lambda: f(x))
show("a_again", lambda: f(x))
show("b", lambda: mk()(x))
show("c", lambda: mk()(x))
mk2 = lambda: jax.jit(lambda a: a + jax.lax.rng_uniform(0.0, 1.0, (3,)) * 2)
show("d", lambda: mk2()(x))
show("e", lambda: mk2()(x))
