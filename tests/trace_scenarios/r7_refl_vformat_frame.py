"""An attribute path held in data (a format string in a global, no dunder in it)
applied by string.Formatter().vformat, reaching a frame's globals."""

import string

SCALE = 2.0
FMT = "{0.gi_frame.f_globals[SCALE]}"


def scale_of():
    g = (i for i in ())
    return float(string.Formatter().vformat(FMT, (g,), {}))


mk = lambda: jax.jit(lambda v: v * scale_of())
show("S=2", lambda: mk()(x))
SCALE = 3.0
show("S=3", lambda: mk()(x))
