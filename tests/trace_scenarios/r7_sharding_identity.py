"""A sharding compared by identity with a global default (``s is DEFAULT``): the
callable holds either that very object or an equal NamedSharding made again."""

from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

mesh = Mesh(np.array(jax.devices()), ("d",))
DEFAULT = NamedSharding(mesh, P())


def run(s, v):
    return v * (2.0 if s is DEFAULT else 3.0)


mk = lambda s: jax.jit(lambda v: run(s, v))
show("default", lambda: mk(DEFAULT)(x))
show("other", lambda: mk(NamedSharding(mesh, P()))(x))
