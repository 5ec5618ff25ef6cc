"""A scenario of the second outside review of trace reuse (see test_trace_review.py)."""

import enum


class Planet(enum.Enum):
    EARTH = (1.0,)

    def __init__(self, m):
        self.mass = m


mk = lambda p: jax.jit(lambda v: v * p.mass)
show("mass=1", lambda: mk(Planet.EARTH)(x))
Planet.EARTH.mass = 7.0
show("mass=7", lambda: mk(Planet.EARTH)(x))
