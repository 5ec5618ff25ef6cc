"""A scenario of the fourth outside review of trace reuse (see test_trace_review.py)."""


class Mode:
    pass


mk = lambda: jax.jit(lambda v: v * len(Mode.__name__))
show("Mode", lambda: mk()(x))
Mode.__name__ = "Inference"
show("Inference", lambda: mk()(x))
