# Review 84 (jet), in process: a rule of the program's registered on one of JAX's own
# primitives in jax.experimental.jet's table between steps.
from jax import lax
from jax.experimental import jet as J

SAVED = J.jet_rules[lax.neg_p]  # (restored below: the driver runs every scenario)
mk = lambda: jax.jit(lambda a: J.jet(lax.neg, (a,), ((a,),))[1][0])
for i in range(3):
    show(f"a{i}", lambda: mk()(x))


def my_neg(primals_in, series_in):
    (p,), (s,) = primals_in, series_in
    return lax.neg(p), [3.0 * t for t in s]


J.jet_rules[lax.neg_p] = my_neg
for i in range(3):
    show(f"b{i}", lambda: mk()(x))
J.jet_rules[lax.neg_p] = SAVED
for i in range(3):
    show(f"c{i}", lambda: mk()(x))
