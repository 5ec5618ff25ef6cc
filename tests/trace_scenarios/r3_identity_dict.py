"""A scenario of the third outside review of trace reuse (see test_trace_review.py)."""


# A global dict keyed by (identity-hashed) function objects; two equal closures.
def make_act():
    def act(v):
        return v

    return act


a1, a2 = make_act(), make_act()
GAIN = {a1: 1.0, a2: 5.0}


def mk(act):
    return jax.jit(lambda v: act(v) * GAIN[act])


show("a1", lambda: mk(a1)(x))
show("a2", lambda: mk(a2)(x))
