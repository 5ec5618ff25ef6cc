import enum


class Planet(enum.Enum):
    EARTH = (1.0,)

    def __init__(self, m):
        self.mass = m


mk = lambda: jax.jit(lambda v: v * Planet.EARTH.mass)
show("mass=1", lambda: mk()(x))
Planet.EARTH.mass = 7.0
show("mass=7", lambda: mk()(x))
mk2 = lambda P: jax.jit(lambda v: v * sum(p.mass for p in P))
show("iter mass=7", lambda: mk2(Planet)(x))
Planet.EARTH.mass = 9.0
show("iter mass=9", lambda: mk2(Planet)(x))


class Mode(enum.Enum):
    A = 2.0


mk3 = lambda: jax.jit(lambda v: v * Mode["A"].value)
show("A=2", lambda: mk3()(x))
Mode.A._value_ = 3.0
show("A=3", lambda: mk3()(x))
