# Review 19: an attribute set on a Mesh and an AbstractMesh passed as static arguments (their == is identity; what they held was not keyed).
from jax.sharding import AbstractMesh, Mesh


def f(a, m):
    return a * getattr(m, "scale", 1.0)


mk = lambda: jax.jit(lambda a, m: f(a, m), static_argnums=1)
M = Mesh(np.array(jax.devices()), ("x",))
object.__setattr__(M, "scale", 2.0)
show("a", lambda: mk()(x, M))
show("b", lambda: mk()(x, M))
object.__setattr__(M, "scale", 3.0)
show("c", lambda: mk()(x, M))
A = AbstractMesh((1,), ("x",))
object.__setattr__(A, "scale", 5.0)
show("d", lambda: mk()(x, A))
show("e", lambda: mk()(x, A))
object.__setattr__(A, "scale", 7.0)
show("f", lambda: mk()(x, A))
