"""A scenario of the second outside review of trace reuse (see test_trace_review.py)."""

S = 2.0


def act(v):
    return v * S


mk = lambda: jax.jit(lambda f, v: f(v), static_argnums=0)
show("S=2", lambda: mk()(act, x))
S = 3.0
show("S=3", lambda: mk()(act, x))
lst = [2.0]


def act2(v, c=lst):
    return v * c[0]


show("c=2", lambda: mk()(act2, x))
lst[0] = 5.0
show("c=5", lambda: mk()(act2, x))
import dataclasses


@dataclasses.dataclass(frozen=True)
class Cfg:
    k: float

    def scale(self):
        return self.k * S


mk2 = lambda: jax.jit(lambda c, v: v * c.scale(), static_argnums=0)
show("cfg S=3", lambda: mk2()(Cfg(1.0), x))
S = 4.0
show("cfg S=4", lambda: mk2()(Cfg(1.0), x))


class Model:  # default identity __eq__/__hash__
    def __init__(self):
        self.scale = 2.0


m = Model()
mk3 = lambda: jax.jit(lambda mod, v: v * mod.scale, static_argnums=0)
show("obj scale=2", lambda: mk3()(m, x))
m.scale = 6.0
show("obj scale=6", lambda: mk3()(m, x))
