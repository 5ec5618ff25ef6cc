# Review 19: a Mesh's devices array reshaped in place (plain Python: devices.shape = ...).
from jax.sharding import Mesh


def f(a, m):
    return a * (1 + m.devices.ndim)


mk = lambda: jax.jit(lambda a, m: f(a, m), static_argnums=1)
M = Mesh(np.array(jax.devices()[:1]), ("x",))
show("a", lambda: mk()(x, M))
show("b", lambda: mk()(x, M))
M.devices.shape = (1, 1)
show("c", lambda: mk()(x, M))
