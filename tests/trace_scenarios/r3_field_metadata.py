"""A scenario of the third outside review of trace reuse (see test_trace_review.py)."""

# dataclasses.Field objects (__dataclass_fields__ is skipped as bookkeeping).
import dataclasses

META = {"scale": 2.0}


@dataclasses.dataclass(frozen=True)
class Cfg:
    a: float = dataclasses.field(default=1.0, metadata=META)


def mk(c):
    return jax.jit(lambda v: v * c.a * dataclasses.fields(c)[0].metadata["scale"])


show("2", lambda: mk(Cfg())(x))
META["scale"] = 3.0
show("3", lambda: mk(Cfg())(x))
