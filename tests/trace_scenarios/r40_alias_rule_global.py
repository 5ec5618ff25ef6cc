# Review 40 (in-process variant of t3_alias_rw_vw): a global dict keyed by the very function a pytree rule holds as its default, then by an equal one: identity between the registry rules' walk and the globals' walk is keyed since.
def mk():
    def fa(v):
        return v

    return fa


FA = mk()
TABLE = {FA: 2.0}


class Box:
    def __init__(self, v):
        self.v = v


def unflat(aux, ch, k=FA):
    return Box(ch[0] * TABLE.get(k, 1.0))


jax.tree_util.register_pytree_node(Box, lambda b: ((b.v,), None), unflat)
step = lambda: jax.jit(lambda b: b.v + 1.0)(Box(x))
show("a", step)
show("a2", step)
TABLE = {mk(): 2.0}
show("b", step)
