# Review 38 (reg_static): a false hit of persisted traces at ecaba96, fixed since.
# alone: changes what the key holds for every later call (registrations, process state)
import os

if os.environ.get("PHASE") == "B":
    jax.tree_util.register_static(complex)


def f(a):
    return a * len(jax.tree_util.tree_leaves((a, 1j)))


show("static", lambda: jax.jit(f)(x))
