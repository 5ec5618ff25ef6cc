# Review 36 (c2_config_tc): a trace-context JAX option set from an int to False: the trace context by exact type since.
mk = lambda: jax.jit(lambda x: jnp.asarray(jax.config.jax_random_seed_offset))
show("int", lambda: mk()(x))
jax.config.update("jax_random_seed_offset", False)
show("bool", lambda: mk()(x))
jax.config.update("jax_random_seed_offset", 0)
