"""A scenario of the third outside review of trace reuse (see test_trace_review.py)."""


# np.seterrcall's callback is not in the host state (np.geterr() is).
def boom(*a):
    raise FloatingPointError("boom")


def quiet(*a):
    pass


np.seterr(over="call")
big = np.array([3e38], dtype=np.float32)
mk = lambda: jax.jit(lambda v: v + float((big * np.float32(10))[0] > 0))
np.seterrcall(quiet)
show("quiet", lambda: mk()(x))
np.seterrcall(boom)
show("boom", lambda: mk()(x))
