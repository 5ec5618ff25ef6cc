# Review 107 (s03_blocked_module): B only: sys.modules["encodings.punycode"] = None (the interpreter's way to block an
# B only: sys.modules["encodings.punycode"] = None (the interpreter's way to block an
# import); str.encode("idna") of a non-ASCII label imports it while traced: stock B
# raises ImportError. A imported punycode before its trace (as r70: A loaded it first).
# alone: it blocks a module for every later call
import os, sys

if os.environ["PHASE"] == "A":
    import stringprep, encodings.idna, encodings.punycode

    "Bücher.example".encode("idna")
else:
    import stringprep, encodings.idna

    "x".encode("idna")
    sys.modules["encodings.punycode"] = None


def f(a):
    return a * len("Bücher.example".encode("idna"))


show("p1", lambda: jax.jit(f)(x))
