"""A program's import finder serving its own ``stringprep`` (the real one, with
``map_table_b2`` doubled: ``str.encode("idna")`` imports it while traced), for the
persisted review scenarios of review 107 (``tests/persist_scenarios/r107_*``)."""

import importlib.machinery
import importlib.util
import os
import sysconfig

STD = sysconfig.get_paths()["stdlib"]
with open(os.path.join(STD, "stringprep.py")) as fh:
    SRC = fh.read() + "\n_b2 = map_table_b2\n\n\ndef map_table_b2(a):\n    return _b2(a) * 2\n"


def file_finder(path):
    return importlib.machinery.FileFinder(path, (importlib.machinery.SourceFileLoader, [".py"]))


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
        exec(compile(SRC, "<stringprep>", "exec"), m.__dict__)  # noqa: S102 - the scenario's own copy
