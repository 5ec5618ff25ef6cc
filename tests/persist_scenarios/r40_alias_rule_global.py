# Review 40 (t3_alias_rw_vw): a pytree rule's default that is the very key of a global dict the rule reads (A) or an equal function (B): identity between the registry rules' walk and the globals' walk is keyed since.
# alone: changes what the key holds for every later call (registrations, process state)
import os


def mk():
    def fa(v):
        return v

    return fa


FA = mk()
TABLE = {FA: 2.0}
K = FA if os.environ.get("PHASE") == "A" else mk()


class Box:
    def __init__(self, v):
        self.v = v


def flat(b):
    return (b.v,), None


def unflat(aux, ch, k=K):
    return Box(ch[0] * TABLE.get(k, 1.0))


jax.tree_util.register_pytree_node(Box, flat, unflat)


def f(b):
    return b.v + 1.0


show("box", lambda: jax.jit(f)(Box(x)))
