# alone
# An absl flag given on the command line in B only, with its default value: equal
# values, but `.present` differs and a trace reads it (review 168).
import os

from absl import flags

flags.DEFINE_float("scale_r168", 2.0, "scale")
flags.FLAGS(["prog"] + (["--scale_r168=2.0"] if os.environ["PHASE"] == "B" else []))


def f(a):
    return a * (flags.FLAGS["scale_r168"].present + 1.0)


show("p1", lambda: jax.jit(f)(x))
