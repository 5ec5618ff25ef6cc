# A functools.partial used as a scan body: JAX caches the body's trace on the partial
# object. Its captured list changes; the next jit over it gets JAX's stale body in
# stock JAX (not compared here), and must not record it for a fresh, equal partial.
import functools

from jax import lax


def body(L, c, _):
    return c * L[0], None


run = lambda p: lambda x: lax.scan(p, x, None, length=1)[0]  # noqa: E731
L1 = [2.0]
p1 = functools.partial(body, L1)
show("first", lambda: jax.jit(run(p1))(x))
L1[0] = 3.0
jax.block_until_ready(jax.jit(run(p1))(x))  # stock: JAX's stale body
show("fresh", lambda: jax.jit(run(functools.partial(body, [3.0])))(x))
