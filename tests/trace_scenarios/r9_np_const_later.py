# a captured numpy array is a jaxpr constant held by reference; a reused trace holds
# the OLD callable's array. After the reuse the old buffer changes; a later
# transformation of the new jit object (grad) reuses JAX's cached trace of it and
# lowers the old array's current content
def mk(A):
    return jax.jit(lambda x: jnp.sum(x * A))


A1 = np.full(3, 2.0, np.float32)
show("first", lambda: mk(A1)(x))  # traced, recorded
j2 = mk(np.full(3, 2.0, np.float32))
show("second", lambda: j2(x))  # reused
A1[:] = 7.0  # the old callable's buffer, no longer used
show("grad", lambda: jax.grad(j2)(x))
