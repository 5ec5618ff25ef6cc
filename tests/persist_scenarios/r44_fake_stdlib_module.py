# Review 44 (g4): a module made by types.ModuleType, filled by exec with a standard
# library file's name and put in sys.modules under that module's name: its code is
# not what the file defines, so it is user code.
import os
import statistics as _real
import sys
import types

K = 2.0 if os.environ.get("PHASE") == "A" else 3.0
m = types.ModuleType("statistics")
m.__file__ = _real.__file__
sys.modules["statistics"] = m
exec(
    compile("def g(a):\n    return a * __import__('__main__').K\n", _real.__file__, "exec"), vars(m)
)


def f(a):
    return m.g(a)


show("g4", lambda: jax.jit(f)(x))
sys.modules["statistics"] = _real
