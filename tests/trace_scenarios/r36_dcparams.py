# Review 36 (f3_dcparams): a __dataclass_params__ slot set from True to 1: slots keyed by exact type since.
import dataclasses


@dataclasses.dataclass(frozen=True)
class C:
    a: float = 1.0


mk = lambda: jax.jit(lambda x: jnp.asarray(C.__dataclass_params__.eq))
show("true", lambda: mk()(x))
C.__dataclass_params__.eq = 1
show("one", lambda: mk()(x))
