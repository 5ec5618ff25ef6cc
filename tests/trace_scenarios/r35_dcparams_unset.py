# Review 35 (a3_dcparams_unset): a __dataclass_params__ slot deleted after being None: an unset slot is keyed as unset since.
import dataclasses


@dataclasses.dataclass
class C:
    a: float = 1.0


def f(x):
    try:
        v = C.__dataclass_params__.order
    except AttributeError:
        v = 7
    return x * (5 if v is None else 3) + (v if type(v) is int else 0)


mk = lambda: jax.jit(lambda x: f(x))
C.__dataclass_params__.order = None
show("a", lambda: mk()(x))
del C.__dataclass_params__.order
show("b", lambda: mk()(x))
