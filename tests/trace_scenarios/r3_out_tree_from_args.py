"""A scenario of the third outside review of trace reuse (see test_trace_review.py)."""


# A pytree argument passed through: the output's aux data is the first call's object, not this call's.
class Layer:
    def __init__(self, w, fn):
        self.w, self.fn = w, fn


jax.tree_util.register_pytree_node(Layer, lambda l: ((l.w,), l.fn), lambda fn, c: Layer(c[0], fn))


def make_act(k):
    def act(v):
        return v * k[0]

    return act


mk = lambda: jax.jit(lambda layer: Layer(layer.w * 2, layer.fn))
ka, kb = [2.0], [2.0]
act_a, act_b = make_act(ka), make_act(kb)
out_a = mk()(Layer(x, act_a))
out_b = mk()(Layer(x, act_b))
show("same_fn", lambda: np.array(out_b.fn is act_b))
kb[0] = 5.0
show("apply_b", lambda: out_b.fn(out_b.w))
