# Review 36 (p1_printopts): numpy's linewidth print option set to 75.0 after 75: print options by exact type since.
mk = lambda: jax.jit(lambda x: x + jnp.asarray(np.get_printoptions()["linewidth"]))
show("int", lambda: mk()(jnp.arange(3)))
np.set_printoptions(linewidth=75.0)
show("float", lambda: mk()(jnp.arange(3)))
np.set_printoptions(linewidth=75)
