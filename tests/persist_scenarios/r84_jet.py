# Review 84 (jet): a rule of the program's registered on one of JAX's own primitives in
# jax.experimental.jet's table, in B only: the table was not among those the key reads
# (every table of primitives JAX's loaded modules hold is read since).
# alone: it registers a rule
import os

from jax import lax
from jax.experimental import jet as J

if os.environ["PHASE"] == "B":

    def my_neg(primals_in, series_in):
        (p,), (s,) = primals_in, series_in
        return lax.neg(p), [3.0 * t for t in s]

    J.jet_rules[lax.neg_p] = my_neg


def f(a):
    return J.jet(lax.neg, (a,), ((a,),))[1][0]


show("jet", lambda: jax.jit(f)(x))
