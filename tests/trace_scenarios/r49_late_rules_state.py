# Review 49 (cj1, cj2, cj3, cv2): Python JAX runs after the trace (a custom_jvp's jvp
# thunk under grad/jvp, a custom_vmap rule under vmap) read state the program changed
# between a reused call and the transform; JAX caches what it returns on the jaxpr a
# reuse shares. Such traces are not recorded now (pcache/_late.py).
import functools

from jax import custom_batching
from jax.scipy.special import expn

grad = lambda f: jax.grad(lambda v: f(v).sum())(x)


def steps(tag, mk, arr, changed, transform):
    """A reused call, the state changed for a transform of it, then changed back for
    a transform of a re-created callable."""
    f1 = mk()
    show(f"{tag}-p", lambda: f1(x))
    old = arr.copy()
    arr[:] = changed
    show(f"{tag}-1", lambda: transform(f1))
    arr[:] = old
    show(f"{tag}-2", lambda: transform(mk()))


d = np.zeros((3,), np.int32)  # a library partial over a numpy array, as a jvp rule
cf = jax.custom_jvp(jnp.sin)
cf.defjvps(functools.partial(jax.lax.select_n, d))
steps("a", lambda: jax.jit(lambda v: cf(v)), d, 2, grad)

N = np.ones((3,), np.int32)  # a numpy array as a nondiff argument of a library rule
steps("b", lambda: jax.jit(lambda v: expn(N, v + 1.0)), N, 3, grad)

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
xs = jnp.stack([x, x + 1.0])
mk = lambda: jax.jit(lambda v: custom_batching.sequential_vmap(rule)(v, v * 2.0))
steps("d", mk, e, 1, lambda f: jax.vmap(f)(xs))
