# Review 54 (npy_cpu): numpy's CPU dispatch (NPY_DISABLE_CPU_FEATURES in B) changes a constant numpy computes while tracing: numpy's CPU features are keyed since.
# alone: B runs again under another environment
# numpy's CPU dispatch, set from the environment at numpy's import (NPY_DISABLE_CPU_FEATURES) or by the machine,
# changes a constant computed with numpy while tracing; B re-executes itself with the variable set
import os, sys

if os.environ["PHASE"] == "B" and "NPY_DISABLE_CPU_FEATURES" not in os.environ:
    os.environ["NPY_DISABLE_CPU_FEATURES"] = "X86_V3"
    sys.stdout.flush()
    os.execv(sys.executable, [sys.executable, *sys.orig_argv[1:]])
C = np.array([0.2188], dtype=np.float32)


def f(a):
    return a * np.sin(C)


show("n1", lambda: jax.jit(f)(x))
