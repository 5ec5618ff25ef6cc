import dataclasses


def mk_unit(k):
    class Unit:
        scale = k

    return Unit


U2, U3 = mk_unit(2.0), mk_unit(3.0)


@dataclasses.dataclass(frozen=True)
class Cfg:
    a: float = 1.0


F = dataclasses.fields(Cfg)[0]
F.type = U2
mk = lambda c: jax.jit(lambda v: v * c.a * dataclasses.fields(c)[0].type.scale)
show("U2", lambda: mk(Cfg())(x))
F.type = U3
show("U3", lambda: mk(Cfg())(x))
