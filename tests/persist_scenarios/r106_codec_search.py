# Review 106 (s02): a codec search function the program registers at import (which one: read from the environment) ran while tracing; the interpreter holds it, no key saw it.
# alone: registers a codec search function (interpreter state)
# the program registers a codec search function at import; which one depends on the
# environment (read at import); the traced function encodes with it
import codecs, os

P = os.environ["PHASE"]


def enc2(s, errors="strict"):
    return (s.encode("utf-8") * 2, len(s))


def enc3(s, errors="strict"):
    return (s.encode("utf-8") * 3, len(s))


def dec(b, errors="strict"):
    return (bytes(b).decode("utf-8"), len(b))


def search2(name):
    return codecs.CodecInfo(enc2, dec, name="r106c") if name == "r106c" else None


def search3(name):
    return codecs.CodecInfo(enc3, dec, name="r106c") if name == "r106c" else None


codecs.register(search2 if P == "A" else search3)


def f(a):
    return a * len("ab".encode("r106c"))


show("codec", lambda: jax.jit(f)(x))
