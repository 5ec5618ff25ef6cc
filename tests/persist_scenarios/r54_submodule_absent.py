# Review 54 (lazy_submod2): hasattr(pkg, "sub") of a library submodule imported in A only: the absence is guarded since.
# a library package's submodule (no registrations) imported in A only; traced code asks hasattr(pkg, "sub")
# alone: a module imported in A only (what it imports and registers differs for every later call)
import os
import jax.experimental

if os.environ["PHASE"] == "A":
    import jax.experimental.mesh_utils


def f(a):
    return a * (2.0 if hasattr(jax.experimental, "mesh_utils") else 3.0)


show("l2", lambda: jax.jit(f)(x))
