"""A scenario of the second outside review of trace reuse (see test_trace_review.py)."""

from jax import lax

L = 2.0


def make_body():
    def body(c, v):
        return c + v * L, None

    return body


mkA = lambda b: jax.jit(lambda v: lax.scan(b, 0.0, v)[0])
mkB = lambda b: jax.jit(lambda v: lax.scan(b, 0.0, v)[0] + 0.0)
b1 = make_body()
show("A(b1) L=2", lambda: mkA(b1)(x))  # JAX caches b1's scan body (L=2) by identity
L = 3.0
show("B(b1) L=3", lambda: mkB(b1)(x))  # both: stale cached body -> 6; pcache records it under L=3
show(
    "B(new) L=3", lambda: mkB(make_body())(x)
)  # stock: fresh body -> 9; pcache: reuses the stale trace -> 6
