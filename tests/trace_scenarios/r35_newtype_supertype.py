# Review 35 (e1_newtype_supertype): a NewType's __supertype__ rebound: a typing annotation is keyed with everything it holds since.
import dataclasses, typing

N = typing.NewType("N", float)


@dataclasses.dataclass
class C:
    a: N = 1.0


mk = lambda: jax.jit(lambda a: jnp.asarray(a, dtype=dataclasses.fields(C)[0].type.__supertype__))
show("a", lambda: mk()(x))
show("a2", lambda: mk()(x))
N.__supertype__ = int
show("b", lambda: mk()(x))
