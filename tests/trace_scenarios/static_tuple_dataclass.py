"""A scenario of the second outside review of trace reuse (see test_trace_review.py)."""

import dataclasses


@dataclasses.dataclass(frozen=True)
class Cfg:
    scale: float


xi = jnp.arange(3, dtype=jnp.int32)
mk = lambda: jax.jit(lambda v, c: v * c.scale, static_argnums=1)
show("Cfg(2)", lambda: mk()(xi, Cfg(2)))
show("Cfg(2.0)", lambda: mk()(xi, Cfg(2.0)))
mk2 = lambda: jax.jit(lambda v, t: v * t[0], static_argnums=1)
show("(2,)", lambda: mk2()(xi, (2,)))
show("(2.0,)", lambda: mk2()(xi, (2.0,)))
