"""A captured float compared by identity with a library module's attribute
(``lim is np.inf``): the callable holds either np.inf itself or an equal float
made again (float('inf'))."""

import math


def clip(lim, v):
    return v * (2.0 if lim is np.inf else 3.0)


mk = lambda lim: jax.jit(lambda v: clip(lim, v))
show("np.inf", lambda: mk(np.inf)(x))
show("float(inf)", lambda: mk(float("inf"))(x))
show("math.inf", lambda: mk(math.inf)(x))
