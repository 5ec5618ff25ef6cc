# Review 56 (absl_argv): absl flags parsed from another command line in A and B, read while tracing: absl's flag values are in the persisted key since.
# alone: the flags differ for every later call
import os

from absl import flags

flags.DEFINE_float("scale_r56", 2.0, "scale")
flags.FLAGS(["prog"] + (["--scale_r56=3.0"] if os.environ["PHASE"] == "B" else []))


def f(a):
    return a * flags.FLAGS.scale_r56


show("p1", lambda: jax.jit(f)(x))
