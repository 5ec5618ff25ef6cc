"""object.__getattribute__ held as a value (a slot wrapper, not the getattr builtin),
called with attribute names computed at trace time, reaching a frame's globals."""

SCALE = 2.0
GA = object.__getattribute__


def scale_of():
    pre = ["gi_", "f_"]
    fr = GA((i for i in ()), pre[0] + "frame")
    return GA(fr, pre[1] + "globals")["SCALE"]


mk = lambda: jax.jit(lambda v: v * scale_of())
show("S=2", lambda: mk()(x))
SCALE = 3.0
show("S=3", lambda: mk()(x))
