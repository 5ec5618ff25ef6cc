# Review 16: a __dict__ property on a frozen dataclass hid an attribute set outside its fields.
import dataclasses


@dataclasses.dataclass(frozen=True)
class C:
    a: float

    @property
    def __dict__(self):
        return {}


c = C(1.0)
object.__setattr__(c, "extra", 2.0)
mk = lambda: jax.jit(lambda x: x * c.a * c.extra)
show("a", lambda: mk()(x))
object.__setattr__(c, "extra", 3.0)
show("b", lambda: mk()(x))
