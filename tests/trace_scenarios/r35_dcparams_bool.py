# Review 35 (a1_dcparams_bool): a dataclass's __dataclass_params__ slot set from False to 0: slots keyed by the walk's rules (exact type) since.
import dataclasses


@dataclasses.dataclass
class C:
    a: float = 1.0


mk = lambda: jax.jit(lambda x: jnp.asarray(C.__dataclass_params__.order))
show("a", lambda: mk()(x))
C.__dataclass_params__.order = 0
show("b", lambda: mk()(x))
