# Review 36 (f2_field_bool2): a dataclass Field's compare flag set from True to 1: Field flags keyed by exact type since.
import dataclasses


@dataclasses.dataclass(frozen=True)
class C:
    a: float = 1.0


mk = lambda: jax.jit(lambda x: jnp.asarray(dataclasses.fields(C)[0].compare))
show("true", lambda: mk()(x))
dataclasses.fields(C)[0].compare = 1
show("one", lambda: mk()(x))
