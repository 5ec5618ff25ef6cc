# alone
# absl's flags parsed in A (an empty command line), never in B: equal values, but an
# unparsed read raises (review 168).
import os

from absl import flags

flags.DEFINE_float("scale_r168b", 2.0, "scale")
if os.environ["PHASE"] == "A":
    flags.FLAGS(["prog"])


def f(a):
    return a * flags.FLAGS.scale_r168b


show("p1", lambda: jax.jit(f)(x))
