"""A scenario of the third outside review of trace reuse (see test_trace_review.py)."""


# The trace writes a flag of the captured array (not in the key): skipped on reuse.
def mk(arr):
    def f(v):
        arr.setflags(write=False)
        return v + jnp.asarray(arr)

    return jax.jit(f)


def step():
    arr = np.ones(3, dtype=np.float32)
    out = mk(arr)(x)
    arr[0] = 2.0  # stock: ValueError, the trace made it read-only
    return out


show("s1", step)
show("s2", step)
