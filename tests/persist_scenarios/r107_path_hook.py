# Review 107 (s02_pathhook): B only: a program's hook on sys.path_hooks (the cache cleared) answers for the standard
# B only: a program's hook on sys.path_hooks (the cache cleared) answers for the standard
# library's directory with a finder of its own that serves its own stringprep, which
# str.encode("idna") imports while traced.
# alone: it leaves an import hook behind
import os, sys, sysconfig, importlib.util, importlib.machinery

P = os.environ["PHASE"]
STD = sysconfig.get_paths()["stdlib"]
with open(os.path.join(STD, "stringprep.py")) as fh:
    SRC = fh.read() + "\n_b2 = map_table_b2\n\n\ndef map_table_b2(a):\n    return _b2(a) * 2\n"


class Finder:
    def __init__(self, path):
        self.inner = importlib.machinery.FileFinder(
            path, (importlib.machinery.SourceFileLoader, [".py"])
        )

    def find_spec(self, name, target=None):
        if name == "stringprep":
            return importlib.util.spec_from_loader(name, self)
        return self.inner.find_spec(name, target)

    def invalidate_caches(self):
        pass

    def create_module(self, spec):
        return None

    def exec_module(self, m):
        exec(compile(SRC, "<stringprep>", "exec"), m.__dict__)


def hook(path):
    if path and os.path.realpath(path) == os.path.realpath(STD):
        return Finder(path)
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
