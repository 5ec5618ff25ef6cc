"""A scenario of the third outside review of trace reuse (see test_trace_review.py)."""


# A captured PyTreeDef of a dict: keys 1 and True compare equal.
def mk(td):
    return jax.jit(lambda leaves: jax.tree_util.tree_unflatten(td, leaves))


show("key1", lambda: np.array([repr(k) for k in mk(jax.tree_util.tree_structure({1: 0}))([x])]))
show(
    "keyTrue", lambda: np.array([repr(k) for k in mk(jax.tree_util.tree_structure({True: 0}))([x])])
)
