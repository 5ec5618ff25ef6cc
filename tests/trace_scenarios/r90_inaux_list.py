# Review 90 (output tree): an argument's auxiliary data (the caller's list) passed
# through to the output; stock hands back the caller's list, a served trace the
# recorded call's.
class Box:
    def __init__(self, v, meta):
        self.v = v
        self.meta = meta


jax.tree_util.register_pytree_node(Box, lambda b: ((b.v,), b.meta), lambda m, c: Box(c[0], m))


def go():
    meta = ["m"]
    out = jax.jit(lambda q: Box(q.v * 2.0, q.meta))(Box(x, meta))
    meta.append("added after the call")
    return out.v + len(out.meta) + 10.0 * float(out.meta is meta)


for i in range(5):
    show(f"a{i}", go)
