# Review 49 (cj1, cj2, cj3, cv2): Python JAX runs after the trace (a custom_jvp's jvp
# thunk under grad/jvp, a custom_vmap rule under vmap) read state the program changed
# between a reused call and the transform; JAX caches what it returns on the jaxpr a
# reuse shares. Such traces are not recorded now (pcache/_late.py).
import functools

from jax import custom_batching
from jax.scipy.special import expn

grad = lambda f: jax.grad(lambda v: f(v).sum())(x)

d = np.zeros((3,), np.int32)  # a library partial over a numpy array, as a jvp rule
cf = jax.custom_jvp(jnp.sin)
cf.defjvps(functools.partial(jax.lax.select_n, d))
mk = lambda: jax.jit(lambda v: cf(v))
f1 = mk()
show("a-p", lambda: f1(x))
d[:] = 2
show("a-g1", lambda: grad(f1))
d[:] = 0
show("a-g2", lambda: grad(mk()))

N = np.ones((3,), np.int32)  # a numpy array as a nondiff argument of a library rule
mk = lambda: jax.jit(lambda v: expn(N, v + 1.0))
f1 = mk()
show("b-p", lambda: f1(x))
N[:] = 3
show("b-g1", lambda: grad(f1))
N[:] = 1
show("b-g2", lambda: grad(mk()))

cg = jax.custom_jvp(jnp.sin)  # the custom_jvp object's own fun, read by its rule
cg.defjvps(functools.partial(jax.lax.select_n, np.int32(1)))
mk = lambda: jax.jit(lambda v: cg(v))
f1 = mk()
show("c-p", lambda: f1(x))
cg.fun = jnp.cos
show("c-j1", lambda: jax.jvp(f1, (x,), (x,))[1])
cg.fun = jnp.sin
show("c-j2", lambda: jax.jvp(mk(), (x,), (x,))[1])

e = np.zeros((3,), np.int32)  # a custom_vmap rule over a numpy array, under vmap
rule = functools.partial(jax.lax.select_n, e)
mk = lambda: jax.jit(lambda v: custom_batching.sequential_vmap(rule)(v, v * 2.0))
xs = jnp.stack([x, x + 1.0])
f1 = mk()
show("d-p", lambda: f1(x))
e[:] = 1
show("d-v1", lambda: jax.vmap(f1)(xs))
e[:] = 0
show("d-v2", lambda: jax.vmap(mk())(xs))
