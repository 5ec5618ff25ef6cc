# Review 54 (scipy_env): a variable a library reads at import (SCIPY_ARRAY_API), set in A only: every environment variable is keyed since.
# alone: changes what the key holds for every later call (the environment)
# a library setting read from the environment at import (SCIPY_ARRAY_API), set in A only
import os

if os.environ["PHASE"] == "A":
    os.environ["SCIPY_ARRAY_API"] = "1"
import scipy.special


def f(a):
    return scipy.special.logsumexp(a)


show("s1", lambda: jax.jit(f)(x))
