# Review 38 (regdc): a false hit of persisted traces at ecaba96, fixed since.
# alone: changes what the key holds for every later call (registrations, process state)
import os

# a library frozen dataclass-like type registered (B only) with JAX's own stateless rules
if os.environ.get("PHASE") == "B":
    jax.tree_util.register_static(slice)


def f(a):
    return a * len(jax.tree_util.tree_leaves([a, slice(1, 2)]))


show("regslice", lambda: jax.jit(f)(x))
