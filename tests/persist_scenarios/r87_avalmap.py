# Review 87 (avalmap): in B only, a handler of the program's in jax.core's
# aval_mapping_handlers (type -> a tuple of functions, which vmap runs while tracing):
# the table was not read (its values are tuples), and A's trace was served.
# alone: it registers a handler
import os

from jax._src import core

if os.environ["PHASE"] == "B":
    _m, _u = core.aval_mapping_handlers[core.ShapedArray]

    def my_map(size, axis, aval):
        return _m(size, axis, aval).update(weak_type=True)

    core.aval_mapping_handlers[core.ShapedArray] = (my_map, _u)


def f(a):
    return jax.vmap(lambda r: r * jnp.float16(2))(a)


show("p1", lambda: jax.jit(f)(jnp.ones((2, 3), jnp.float32)))
