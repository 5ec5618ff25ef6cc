"""A scenario of the third outside review of trace reuse (see test_trace_review.py)."""

# A captured PyTreeDef whose aux data is a user function: the function's globals are not guarded.
ALPHA = 2.0


def act(v):
    return v * ALPHA


class Layer:
    def __init__(self, w, fn):
        self.w, self.fn = w, fn


jax.tree_util.register_pytree_node(Layer, lambda l: ((l.w,), l.fn), lambda fn, c: Layer(c[0], fn))
td = jax.tree_util.tree_structure(Layer(0.0, act))


def mk():
    def f(leaves):
        layer = jax.tree_util.tree_unflatten(td, leaves)
        return layer.fn(layer.w)

    return jax.jit(f)


show("2", lambda: mk()([x]))
ALPHA = 3.0
show("3", lambda: mk()([x]))
