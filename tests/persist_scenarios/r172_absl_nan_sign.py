# alone
# An absl float flag NaN in A, -NaN in B: its repr is 'nan' in both; a trace reads its
# sign (review 172). Flag values are keyed by their bits.
import math
import os

from absl import flags

flags.DEFINE_float("r172_shift", 0.0, "shift")
flags.FLAGS(["prog", "--r172_shift=" + ("nan" if os.environ["PHASE"] == "A" else "-nan")])


def f(a):
    return a + math.copysign(1.0, flags.FLAGS.r172_shift)


show("nan_sign", lambda: jax.jit(f)(x))
