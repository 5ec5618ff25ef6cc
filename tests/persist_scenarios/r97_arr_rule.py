# Review 97 (executable key), across processes: JAX's own lower_fun over a partial of
# lax.mul with a JAX array of the program's (put on the device: no program runs for
# it), registered on neg_p, 2.0 in A and 5.0 in B: the array (a C++ object) was
# described by its empty __dict__, one key in both, and B was served A's executable.
# alone: it registers a lowering rule
import os
from functools import partial

from jax import lax
from jax._src.interpreters import mlir

F = 2.0 if os.environ["PHASE"] == "A" else 5.0
mlir.register_lowering(
    lax.neg_p,
    mlir.lower_fun(partial(lax.mul, y=jax.device_put(np.float32(F))), multiple_results=False),
)
show("p1", lambda: jax.jit(lambda a: lax.neg(a))(x))
