"""A scenario of the third outside review of trace reuse (see test_trace_review.py)."""


# A captured PyTreeDef is compared by its own __eq__ (aux data 2 == 2.0).
class Node:
    def __init__(self, v, k):
        self.v, self.k = v, k


jax.tree_util.register_pytree_node(Node, lambda n: ((n.v,), n.k), lambda k, c: Node(c[0], k))


def mk(td):
    def f(leaves):
        n = jax.tree_util.tree_unflatten(td, leaves)
        return n.v * n.k

    return jax.jit(f)


xi = jnp.arange(3, dtype=jnp.int32)
show("int", lambda: mk(jax.tree_util.tree_structure(Node(0, 2)))([xi]))
show("float", lambda: mk(jax.tree_util.tree_structure(Node(0, 2.0)))([xi]))
