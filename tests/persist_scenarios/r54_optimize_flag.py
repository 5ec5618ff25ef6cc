# Review 54 (py_optimize): A under python -O (asserts stripped from installed code), B without: sys.flags is keyed since.
# alone: A runs again under -O
# A runs under python -O (asserts stripped from installed code: PYTHONOPTIMIZE); B without.
# jnp.pad's reflect_type is checked only by an assert in jax._src.numpy.lax_numpy
import os, sys

if os.environ["PHASE"] == "A" and not sys.flags.optimize:
    sys.stdout.flush()
    os.execv(sys.executable, [sys.executable, "-O", *sys.orig_argv[1:]])


def f(a):
    return jnp.pad(a, 1, mode="reflect", reflect_type="weird")


show("O1", lambda: jax.jit(f)(x))
