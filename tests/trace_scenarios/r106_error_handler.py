# Review 106 (in process): a codec error handler re-registered between calls of a re-created callable; str.encode runs it while tracing, and no key saw it (the codec registries are held by the interpreter).
import codecs

codecs.register_error("r106h", lambda e: ("??", e.end))
mk = lambda: jax.jit(lambda a: a * len("a\u00e9".encode("ascii", "r106h")))  # noqa: E731
show("two", lambda: mk()(x))
show("two again", lambda: mk()(x))
codecs.register_error("r106h", lambda e: ("???", e.end))
show("three", lambda: mk()(x))
codecs.register_error("r106h", codecs.replace_errors)  # (a library's again: later scenarios reuse)
