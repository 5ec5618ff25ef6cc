# Review 55 (import_alias): an import inside the traced function reads sys.modules, whose entry is rebound between steps: guarded there since.
import cmath
import math
import sys

sys.modules["xmath_r55"] = math


def mk():
    def f(a):
        import xmath_r55

        return a * xmath_r55.sqrt(4.0)

    return jax.jit(f)


show("s1", lambda: mk()(x))
sys.modules["xmath_r55"] = cmath
show("s2", lambda: mk()(x))
del sys.modules["xmath_r55"]
