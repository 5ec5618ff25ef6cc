# Review 42 (s5_abcuser): a different user class registered on a library ABC in each process: the registrations themselves are in the persisted key since.
# alone: changes what the key holds for every later call (registrations, process state)
import os, collections.abc


class U:
    pass


class V:
    pass


if os.environ["PHASE"] == "A":
    collections.abc.Sequence.register(U)
else:
    collections.abc.Sequence.register(V)


def f(a):
    return a * (2.0 if issubclass(U, collections.abc.Sequence) else 3.0)


show("abcu", lambda: jax.jit(f)(x))
