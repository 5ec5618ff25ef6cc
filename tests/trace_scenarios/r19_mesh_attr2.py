# Review 19: the same through the Mesh's __dict__, as a static argument and as a captured global.
from jax.sharding import Mesh


def f(a, m):
    return a * m.scale


mk = lambda: jax.jit(lambda a, m: f(a, m), static_argnums=1)
M = Mesh(np.array(jax.devices()), ("x",))
M.__dict__["scale"] = 2.0
show("a", lambda: mk()(x, M))
show("b", lambda: mk()(x, M))
M.__dict__["scale"] = 3.0
show("c", lambda: mk()(x, M))
mk2 = lambda: jax.jit(lambda a: a * M.scale)
show("d", lambda: mk2()(x))
show("e", lambda: mk2()(x))
M.__dict__["scale"] = 4.0
show("f", lambda: mk2()(x))
