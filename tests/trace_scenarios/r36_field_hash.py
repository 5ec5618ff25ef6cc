# Review 36 (f4_field_hash): a Field's hash flag set from False to 0, reached through a static argument: exact type since.
import dataclasses


@dataclasses.dataclass(frozen=True)
class C:
    a: float = dataclasses.field(default=1.0, hash=False)


mk = lambda: jax.jit(lambda x, c: jnp.asarray(dataclasses.fields(c)[0].hash), static_argnums=1)
show("false", lambda: mk()(x, C()))
dataclasses.fields(C)[0].hash = 0
show("zero", lambda: mk()(x, C()))
