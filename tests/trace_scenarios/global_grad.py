"""A scenario of the second outside review of trace reuse (see test_trace_review.py)."""

S = 2.0


def loss(v):
    return jnp.sum(v * v) * S


g = jax.grad(
    loss
)  # module-level library wrapper (also jax.vmap, jnp.vectorize, jacfwd, named_call, value_and_grad)
mk = lambda: jax.jit(lambda v: g(v))
show("S=2", lambda: mk()(x))
S = 3.0
show("S=3", lambda: mk()(x))
