# Review 67 (copyreg2): dataclasses.asdict deep-copies a leaf through copyreg's dispatch table (a user reducer reading a global): never reused since.
import copyreg, dataclasses

SCALE = 2.0


class C:
    def __init__(self, v):
        self.v = v


copyreg.pickle(C, lambda o: (C, (SCALE,)))


@dataclasses.dataclass(frozen=True)
class Box:
    c: object


def body(a):
    return a * dataclasses.asdict(Box(C(1.0)))["c"].v


mk = lambda: jax.jit(lambda a: body(a))
show("s1", lambda: mk()(x))
SCALE = 3.0
show("s2", lambda: mk()(x))
