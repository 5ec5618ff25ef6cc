# Review 107 (s01_pathcache): B only: a program's finder put into sys.path_importer_cache for the standard library's
# B only: a program's finder put into sys.path_importer_cache for the standard library's
# directory; it serves its own stringprep (the real one with map_table_b2 doubled), which
# str.encode("idna") imports while traced. (sys.meta_path is checked: review 70; this is
# PathFinder's per-entry cache, one level below.)
# alone: it leaves an import hook behind
import os, sys

from tests.trace_mods.doubled_stringprep import STD, Finder, file_finder

P = os.environ["PHASE"]


if P == "A":
    import stringprep, encodings.idna  # (A loaded the real ones first, as r70)

    "Bücher.example".encode("idna")  # (and the codec looked up, punycode imported)
else:
    for entry in list(sys.path):
        if entry and os.path.realpath(entry) == os.path.realpath(STD):
            sys.path_importer_cache[entry] = Finder(
                sys.path_importer_cache.get(entry) or file_finder(entry)
            )


def f(a):
    return a * len("Bücher.example".encode("idna"))


show("p1", lambda: jax.jit(f)(x))
