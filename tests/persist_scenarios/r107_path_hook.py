# Review 107 (s02_pathhook): B only: a program's hook on sys.path_hooks (the cache cleared) answers for the standard
# B only: a program's hook on sys.path_hooks (the cache cleared) answers for the standard
# library's directory with a finder of its own that serves its own stringprep, which
# str.encode("idna") imports while traced.
# alone: it leaves an import hook behind
import os, sys

from tests.trace_mods.doubled_stringprep import STD, Finder, file_finder

P = os.environ["PHASE"]


def hook(path):
    if path and os.path.realpath(path) == os.path.realpath(STD):
        return Finder(file_finder(path))
    raise ImportError


if P == "A":
    import stringprep, encodings.idna  # (A loaded the real ones first, as r70)

    "Bücher.example".encode("idna")  # (and the codec looked up, punycode imported)
else:
    sys.path_hooks.insert(0, hook)
    for entry in list(sys.path_importer_cache):
        if entry and os.path.realpath(entry) == os.path.realpath(STD):
            del sys.path_importer_cache[entry]


def f(a):
    return a * len("Bücher.example".encode("idna"))


show("p1", lambda: jax.jit(f)(x))
