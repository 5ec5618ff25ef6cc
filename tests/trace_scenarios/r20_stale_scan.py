# Review 20: the same with an eager lax.scan body and an eager fori_loop body.
from jax import lax


def make_b(L):
    def body(c, _):
        return c * L[0], None

    return body


def make_f(L):
    def body(i, c):
        return c * L[0]

    return body


L = [2.0]
b = make_b(L)
mk = lambda bb: jax.jit(lambda a: lax.scan(bb, a, None, length=2)[0])
show("s1", lambda: mk(b)(jnp.arange(4, dtype=jnp.float32)))
L[0] = 1.0
show("s2", lambda: lax.scan(b, x, None, length=2)[0])
L[0] = 2.0
mk(b)(x)
show("s5", lambda: mk(make_b([2.0]))(x))
M = [2.0]
f = make_f(M)
mkf = lambda bb: jax.jit(lambda a: lax.fori_loop(0, 2, bb, a))
show("f1", lambda: mkf(f)(jnp.arange(4, dtype=jnp.float32)))
M[0] = 1.0
show("f2", lambda: lax.fori_loop(0, 2, f, x))
M[0] = 2.0
mkf(f)(x)
show("f5", lambda: mkf(make_f([2.0]))(x))
