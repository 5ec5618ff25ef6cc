# Review 19: the same mesh held by a global NamedSharding (its mesh is held in C++).
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

M = Mesh(np.array(jax.devices()[:1]), ("x",))
NS = NamedSharding(M, P())
mk = lambda: jax.jit(lambda a: a * (1 + NS.mesh.devices.ndim))
show("a", lambda: mk()(x))
show("b", lambda: mk()(x))
M.devices.shape = (1, 1)
show("c", lambda: mk()(x))
