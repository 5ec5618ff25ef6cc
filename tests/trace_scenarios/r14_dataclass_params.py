# class_code skips CLASS_BOOKKEEPING names, but __dataclass_params__ is an ordinary
# class attribute a trace can read; reassigning it on the same user class is missed.
import dataclasses


@dataclasses.dataclass(frozen=True)
class C:
    a: float = 1.0


@dataclasses.dataclass
class D:
    a: float = 1.0


mk = lambda: jax.jit(lambda x: x * (2.0 if C.__dataclass_params__.frozen else 3.0))
show("a", lambda: mk()(x))
C.__dataclass_params__ = D.__dataclass_params__
show("b", lambda: mk()(x))
