# Review 59 (hasattr of a lazily imported submodule through a for-loop local bound to a library module): hasattr of a lazily imported submodule through a for target: which modules are loaded (by identity) is in the in-process key since.
import json


def mk():
    def f(a):
        for m in (json,):
            has = hasattr(m, "tool")
        return a * (2.0 if has else 3.0)

    return jax.jit(f)


show("r0", lambda: mk()(x))
import json.tool

show("r1", lambda: mk()(x))
