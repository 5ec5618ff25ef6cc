"""A scenario of the third outside review of trace reuse (see test_trace_review.py)."""

# Output tree aux data comes from the recorded trace: the first callable's objects leak into the second's output.
from jax.tree_util import Partial


def mk(k):
    def act(v):
        return v * k[0]

    return jax.jit(lambda v: Partial(act, v)), k


fa, ka = mk([2.0])
pa = fa(x)
fb, kb = mk([2.0])
pb = fb(x)
kb[0] = 5.0  # mutate B's own captured state after its call
show("pb", lambda: pb())  # stock: B's act -> x*5
ka[0] = 7.0
show("pa", lambda: pa())
