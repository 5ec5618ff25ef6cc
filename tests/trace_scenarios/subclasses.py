"""A scenario of the second outside review of trace reuse (see test_trace_review.py)."""


class Plugin:
    pass


class Double(Plugin):
    k = 2.0


mk = lambda: jax.jit(lambda v: v * sum(c.k for c in Plugin.__subclasses__()))
show("1 plugin", lambda: mk()(x))


class Triple(Plugin):
    k = 3.0


show("2 plugins", lambda: mk()(x))
