# Review 81 (attr2): an attribute handler of the program's (mlir.register_attribute_handler)
# reading a global, for the frozen dataclass passed as an ffi_call parameter: the global
# changed between steps; neither the trace-reuse key nor the executable key saw the handler.
import dataclasses

from jax._src.interpreters import mlir
from jax._src.lib import lapack
from jax._src.lib.mlir import ir

lapack.prepare_lapack_call("potrf_ffi", np.float32)
MODE = "L"


@dataclasses.dataclass(frozen=True)
class U:
    pass


mlir.register_attribute_handler(
    U, lambda v: ir.IntegerAttr.get(ir.IntegerType.get_unsigned(8), ord(MODE))
)
UU = U()
A = jnp.array([[4.0, 2.0], [2.0, 3.0]], dtype=jnp.float32)


def body(a):
    out = (jax.ShapeDtypeStruct(a.shape, a.dtype), jax.ShapeDtypeStruct((), jnp.int32))
    r, info = jax.ffi.ffi_call("lapack_spotrf_ffi", out, input_output_aliases={0: 0})(a, uplo=UU)
    return r


mk = lambda: jax.jit(lambda a: body(a))
for i in range(3):
    show(f"a{i}", lambda: mk()(A))
MODE = "U"
for i in range(3):
    show(f"b{i}", lambda: mk()(A))
del mlir._attribute_handlers[U]  # (the driver runs every scenario in one process)
