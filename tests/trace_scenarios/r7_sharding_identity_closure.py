"""Two shardings held by the callable compared by identity (``s is d``): the very
same object, then an equal NamedSharding made again."""

from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

mesh = Mesh(np.array(jax.devices()), ("d",))
D = NamedSharding(mesh, P())

mk = lambda s, d: jax.jit(lambda v: v * (2.0 if s is d else 3.0))
show("same", lambda: mk(D, D)(x))
show("equal", lambda: mk(NamedSharding(mesh, P()), D)(x))
