# Review 35 (a2_field_bool): a dataclass Field's repr flag set from True to 1: Field flags and name keyed by exact type since.
import dataclasses


@dataclasses.dataclass
class C:
    a: float = 1.0


mk = lambda: jax.jit(lambda x: jnp.asarray(dataclasses.fields(C)[0].repr))
show("a", lambda: mk()(x))
dataclasses.fields(C)[0].repr = 1
show("b", lambda: mk()(x))
