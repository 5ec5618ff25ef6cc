"""A scenario of the fourth outside review of trace reuse (see test_trace_review.py)."""

import dataclasses


@dataclasses.dataclass(frozen=True, eq=False)
class Ctx:
    log: list


def f(v, ctx):
    ctx.log.append("traced")
    return v * 2


mk = lambda: jax.jit(f, static_argnums=1)
c1 = Ctx([])
show("c1", lambda: mk()(x, c1))
print("c1.log", c1.log)
c2 = Ctx([])
show("c2", lambda: mk()(x, c2))
print("c2.log", c2.log)
c3 = Ctx([])
show("c3", lambda: mk()(x, c3))
print("c3.log", c3.log)
