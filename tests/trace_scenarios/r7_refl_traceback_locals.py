"""traceback (not on the reflection list) hands the trace the locals of the frames
above it as text: the module frame's SCALE."""

import traceback

SCALE = 2.0


def scale_of():
    for fs in traceback.StackSummary.extract(traceback.walk_stack(None), capture_locals=True):
        if fs.name == "<module>" and fs.locals and "SCALE" in fs.locals:
            return float(fs.locals["SCALE"])


mk = lambda: jax.jit(lambda v: v * scale_of())
show("S=2", lambda: mk()(x))
SCALE = 3.0
show("S=3", lambda: mk()(x))
