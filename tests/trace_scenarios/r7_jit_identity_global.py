"""A jit object compared by identity with a global jit object (``fn is DEFAULT``):
the callable holds either that very object or an equal, re-created jax.jit(step)."""


def step(v):
    return v * 2.0


DEFAULT = jax.jit(step)


def run(fn, v):
    return fn(v) + (0.0 if fn is DEFAULT else 100.0)


mk = lambda fn: jax.jit(lambda v: run(fn, v))
show("default", lambda: mk(DEFAULT)(x))
show("other", lambda: mk(jax.jit(step))(x))
