# Review 36 (c1_config): a JAX option (not in the trace context) set from an int to False: the config snapshot by exact type since.
mk = lambda: jax.jit(lambda x: jnp.asarray(jax.config.jax_captured_constants_report_frames))
show("int", lambda: mk()(x))
jax.config.update("jax_captured_constants_report_frames", False)
show("bool", lambda: mk()(x))
jax.config.update("jax_captured_constants_report_frames", 0)
