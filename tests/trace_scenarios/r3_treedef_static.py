"""A scenario of the third outside review of trace reuse (see test_trace_review.py)."""


# A static PyTreeDef argument: pcache compares it with ==, as JAX does, but stock traces a new jit object afresh.
class Node:
    def __init__(self, v, k):
        self.v, self.k = v, k


jax.tree_util.register_pytree_node(Node, lambda n: ((n.v,), n.k), lambda k, c: Node(c[0], k))


def body(leaves, td):
    n = jax.tree_util.tree_unflatten(td, leaves)
    return n.v * n.k


mk = lambda: jax.jit(
    lambda leaves, td: body(leaves, td), static_argnums=1
)  # a new callable each step
xi = jnp.arange(3, dtype=jnp.int32)
show("int", lambda: mk()([xi], jax.tree_util.tree_structure(Node(0, 2))))
show("float", lambda: mk()([xi], jax.tree_util.tree_structure(Node(0, 2.0))))
