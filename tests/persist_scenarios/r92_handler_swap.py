# Review 92 (handlers): in B only, JAX's own constant handler of masked arrays (which
# raises) registered for numpy arrays and scalars: stock B raises, A's trace and
# executable were served (a JAX handler for another type was in neither key).
# alone: it registers handlers
import os

from jax._src import literals
from jax._src.interpreters import mlir

if os.environ["PHASE"] == "B":
    h = mlir._constant_handlers[np.ma.MaskedArray]
    for t in (np.ndarray, literals.TypedNdArray, np.float32):
        mlir.register_constant_handler(t, h)
C = np.array([1.0, 2.0, 5.0], np.float32)


def f(a):
    return a * C + np.float32(2.0)


show("p1", lambda: jax.jit(f)(x))
