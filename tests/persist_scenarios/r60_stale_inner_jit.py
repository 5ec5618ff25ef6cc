# Review 60 (stale_inner_jit): A calls a global jit, then rebinds the global it reads, then traces a new function calling it: JAX hands that trace the inner jit's old trace, which A stored under a key holding the new value. The content walks' functions are evicted before a stored trace since.
# Since review 82 the global jit is walked as a value: A sees its function's state changed
# after JAX cached its trace and records nothing of f (B traces: not served).
import os

A = os.environ["PHASE"] == "A"
SCALE = 2.0 if A else 3.0


@jax.jit
def inner(a):
    return a * SCALE


def f(a):
    return inner(a) + 1.0


if A:
    inner(x)
    SCALE = 3.0
show("p1", lambda: jax.jit(f)(x))
