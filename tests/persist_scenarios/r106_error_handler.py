# Review 106 (s03): a codec error handler the program registers at import ran while tracing; no key saw it.
# alone: registers a codec error handler (interpreter state)
# the program registers an encode error handler at import; which one depends on the
# environment; the traced function encodes a non-ASCII string with it
import codecs, os

P = os.environ["PHASE"]


def h2(e):
    return ("??", e.end)


def h3(e):
    return ("???", e.end)


codecs.register_error("r106h", h2 if P == "A" else h3)


def f(a):
    return a * len("a\u00e9".encode("ascii", "r106h"))


show("errh", lambda: jax.jit(f)(x))
