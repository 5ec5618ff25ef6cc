"""A scenario of the third outside review of trace reuse (see test_trace_review.py)."""


# Same as f30 with ONE long-lived jit object: the second call (new aux object) misses JAX's caches and is served by reuse.
class Layer:
    def __init__(self, w, fn):
        self.w, self.fn = w, fn


jax.tree_util.register_pytree_node(Layer, lambda l: ((l.w,), l.fn), lambda fn, c: Layer(c[0], fn))


def make_act(k):
    def act(v):
        return v * k[0]

    return act


step = jax.jit(lambda layer: Layer(layer.w * 2, layer.fn))
ka, kb = [2.0], [2.0]
act_a, act_b = make_act(ka), make_act(kb)
out_a = step(Layer(x, act_a))
out_b = step(Layer(x, act_b))
show("same_fn", lambda: np.array(out_b.fn is act_b))
kb[0] = 5.0
show("apply_b", lambda: out_b.fn(out_b.w))
