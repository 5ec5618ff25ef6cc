"""The control: nothing changes between steps, so the re-created jit is reused
(the driver asserts that some trace was)."""

S = 2.0


def loss(v):
    return jnp.sum(v * v) * S


mk = lambda: jax.jit(jax.grad(loss))
show("step 1", lambda: mk()(x))
show("step 2", lambda: mk()(x))
