# Review 42 (s1_abc): a different library class registered on a library ABC in each process (the same number of registrations): the registrations themselves are in the persisted key since.
# alone: changes what the key holds for every later call (registrations, process state)
import os, collections.abc

if os.environ["PHASE"] == "A":
    collections.abc.Set.register(range)
else:
    collections.abc.Set.register(bytes)


def f(a):
    return a * (2.0 if isinstance(range(1), collections.abc.Set) else 3.0)


show("abc", lambda: jax.jit(f)(x))
