# Review 84 (checkify): a rule of the program's registered on one of JAX's own primitives
# in checkify's table, in B only: the table was not among those the key reads.
# alone: it registers a rule
import os

from jax import lax
from jax._src import checkify as C
from jax.experimental import checkify

if os.environ["PHASE"] == "B":

    def my_neg(error, enabled_errors, a):
        return error, lax.mul(a, 3.0)

    C.error_checks[lax.neg_p] = my_neg


def f(a):
    err, out = checkify.checkify(lambda v: -v)(a)
    return out


show("ck", lambda: jax.jit(f)(x))
