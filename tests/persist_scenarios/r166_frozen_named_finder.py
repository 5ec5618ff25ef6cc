# alone
# served (its first call, made before the registration)
# A program finder whose code names the interpreter's frozen file ("<frozen
# importlib._bootstrap>") runs inside a JAX import (jax.experimental.ode importing
# jax.flatten_util) and registers a library class made after pcache's first read:
# A int32, B float16. Code under a frozen name is the interpreter's only in a module
# it holds frozen: this is program code, the import is not proven clean, and the
# entry is in the key (review 166).
import os
import sys
import numpy as _np
from jax._src import dtypes as D

jax.jit(lambda v: v + 1)(x)  # (pcache has read JAX's tables)
import fractions  # (a library class made after that read)

DONE = []
DT = _np.dtype("int32") if os.environ["PHASE"] == "A" else _np.dtype("float16")


def find_spec(name, path=None, target=None):
    if not DONE and name == "jax.flatten_util":
        DONE.append(name)
        D.python_scalar_types_to_dtypes[fractions.Fraction] = DT
    return None


find_spec.__code__ = find_spec.__code__.replace(co_filename="<frozen importlib._bootstrap>")


class Hook:
    pass


hook = Hook()
hook.find_spec = find_spec
sys.meta_path.insert(0, hook)
import jax.experimental.ode  # noqa: F401  (imports jax.flatten_util: not yet loaded)

sys.meta_path.remove(hook)


def f(v):
    return v.astype(D.dtype(fractions.Fraction))


show("cast", lambda: jax.jit(f)(x))
