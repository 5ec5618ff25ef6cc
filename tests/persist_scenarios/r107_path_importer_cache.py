# Review 107 (s01_pathcache): B only: a program's finder put into sys.path_importer_cache for the standard library's
# B only: a program's finder put into sys.path_importer_cache for the standard library's
# directory; it serves its own stringprep (the real one with map_table_b2 doubled), which
# str.encode("idna") imports while traced. (sys.meta_path is checked: review 70; this is
# PathFinder's per-entry cache, one level below.)
# alone: it leaves an import hook behind
import os, sys, sysconfig, importlib.util, importlib.machinery

P = os.environ["PHASE"]
STD = sysconfig.get_paths()["stdlib"]
with open(os.path.join(STD, "stringprep.py")) as fh:
    SRC = fh.read() + "\n_b2 = map_table_b2\n\n\ndef map_table_b2(a):\n    return _b2(a) * 2\n"


class Finder:
    def __init__(self, inner):
        self.inner = inner

    def find_spec(self, name, target=None):
        if name == "stringprep":
            return importlib.util.spec_from_loader(name, self)
        return self.inner.find_spec(name, target)

    def invalidate_caches(self):
        self.inner.invalidate_caches()

    def create_module(self, spec):
        return None

    def exec_module(self, m):
        exec(compile(SRC, "<stringprep>", "exec"), m.__dict__)


if P == "A":
    import stringprep, encodings.idna  # (A loaded the real ones first, as r70)

    "Bücher.example".encode("idna")  # (and the codec looked up, punycode imported)
else:
    for entry in list(sys.path):
        if entry and os.path.realpath(entry) == os.path.realpath(STD):
            sys.path_importer_cache[entry] = Finder(
                sys.path_importer_cache.get(entry)
                or importlib.machinery.FileFinder(
                    entry, (importlib.machinery.SourceFileLoader, [".py"])
                )
            )


def f(a):
    return a * len("Bücher.example".encode("idna"))


show("p1", lambda: jax.jit(f)(x))
