# Review 44 (h1): a user class stored in a library module under its name is not a library class (its methods are not library code).
import os, collections


class MyC:
    if os.environ.get("PHASE") == "A":

        @staticmethod
        def k(a):
            return a * 2.0
    else:

        @staticmethod
        def k(a):
            return a * 3.0


MyC.__module__ = "collections"
collections.MyC = MyC


def f(a):
    return MyC.k(a)


show("h1", lambda: jax.jit(f)(x))
