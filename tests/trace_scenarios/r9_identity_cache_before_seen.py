# JAX caches a scan body's trace by the function's identity. Here that cache is filled
# by an eager (un-jitted) scan before pcache ever walks the body; the body's captured
# list then changes; the first jit using it gets JAX's stale body in stock JAX, and
# must not record it under the body's NEW state for a fresh, equal body.
from jax import lax


def make_body(L):
    def body(c, _):
        return c * L[0], None

    return body


run = lambda b: lambda x: lax.scan(b, x, None, length=1)[0]  # noqa: E731
L1 = [2.0]
b1 = make_body(L1)
show("eager", lambda: run(b1)(x))  # no jit: JAX caches b1's body (L=2)
L1[0] = 3.0
# Stock: JAX's stale body (2). pcache drops JAX's traces of a function it meets for
# the first time, and traces afresh (3): a documented difference, not compared here.
jax.block_until_ready(jax.jit(run(b1))(x))
show("jit-b2", lambda: jax.jit(run(make_body([3.0])))(x))  # fresh equal body: 3
