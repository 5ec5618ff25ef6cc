"""A scenario of the fourth outside review of trace reuse (see test_trace_review.py)."""

DEFAULT_AXES = (2.0, 1.0)


def mk(axes):
    return jax.jit(lambda v: v * (10.0 if axes is DEFAULT_AXES else 1.0) * axes[0])


show("alias", lambda: mk(DEFAULT_AXES)(x))
show("copy", lambda: mk(tuple(list(DEFAULT_AXES)))(x))


def mk2(a, b):
    return jax.jit(lambda v: v * (10.0 if a is b else 1.0))


t = (1.0, 2.0)
show("same", lambda: mk2(t, t)(x))
show("copy2", lambda: mk2(t, tuple(list(t)))(x))
