"""A scenario of the fourth outside review of trace reuse (see test_trace_review.py)."""

import enum


class Planet(enum.Enum):
    EARTH = 1
    MARS = 2


Planet.EARTH.g = 9.8
Planet.MARS.g = 3.7


def mk(ps):
    return jax.jit(lambda v: v * ps[1].g)


show("mars g=3.7", lambda: mk((Planet.EARTH, Planet.MARS))(x))
Planet.MARS.g = 1.0
show("mars g=1.0", lambda: mk((Planet.EARTH, Planet.MARS))(x))
