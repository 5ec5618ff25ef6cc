# Review 50 (srv3): a serve prepared for a call that raised before JAX traced (a user flatten) was taken by the next call of the same function with another static argument, and persisted under its key: a pending serve is dropped at every call.
# alone: changes what the key holds for every later call (registrations, process state)
import os

A = os.environ["PHASE"] == "A"


class P:
    def __init__(self, v, n):
        self.v = v
        self.it = iter(range(n))


def fl(p):
    next(p.it)
    return (p.v,), None


def un(aux, ch):
    return P(ch[0], 9)


jax.tree_util.register_pytree_node(P, fl, un)


def f(p, k):
    return p.v * k


jf = jax.jit(f, static_argnums=1)
show("one", lambda: jf(P(x, 9 if A else 3), 2.0))
if not A:
    show("two", lambda: jf(P(x, 9), 3.0))
