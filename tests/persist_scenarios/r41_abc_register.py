# Review 41 (abc_reg): a library class registered on a library ABC in B only: ABCMeta's registration counter is in the key since.
# alone: changes what the key holds for every later call (registrations, process state)
import os, collections.abc

if os.environ.get("PHASE") == "B":
    collections.abc.Set.register(range)
G = range(3)


def f(a):
    return a * (2.0 if isinstance(G, collections.abc.Set) else 3.0)


show("abc", lambda: jax.jit(f)(x))
