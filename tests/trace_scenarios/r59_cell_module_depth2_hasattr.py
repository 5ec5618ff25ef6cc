# Review 59 (a library module in a closure cell: hasattr two submodules down (module_names digests only 2 levels)): a library package in a closure cell, hasattr two submodules down: the loaded modules are in the in-process key since.
def mk(m):
    return jax.jit(lambda a: a * (2.0 if hasattr(m._src.lib, "triton") else 3.0))


show("r0", lambda: mk(jax)(x))
import jax._src.lib.triton

show("r1", lambda: mk(jax)(x))
