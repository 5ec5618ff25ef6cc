"""Library objects by name, for the persisted key (`pcache._persist_key`): the
names loaded library modules hold an object under, the one a key uses (`_lib_node`:
only names their import bound, with what the object is), whether a library's code
may rebind a name (`_rebinds`), and names read back (`resolve_name`, a library's
primitive by `library_primitive_name`).

JAX-free but for the primitive type (`pcache._compat`).
"""

from __future__ import annotations

import sys
import types
from typing import Any

from pcache import _compat, _memos
from pcache._class_shape import looks
from pcache._holders import epoch as holders_epoch
from pcache._holders import library_holders
from pcache._holders import resolve as _resolve
from pcache._introspect import is_a, items, mro, names
from pcache._persist_env import attributed
from pcache._provenance import rebinds_global, stores_global
from pcache._snapshots import unchanged
from pcache._usercode import NoReuse, is_library_module, module_dict

_LIB_NAMES: dict = _memos.memo("persist.library_names", {})  # (id, any) -> (obj, name, n)


def _provider(module: str) -> str:
    m = sys.modules.get(module)
    return attributed(module) if m is not None and is_library_module(m) else ""


def _library_names(v: Any, any_module: bool = False) -> tuple:
    """Every (module, attribute) under which a loaded library module (or any module)
    holds ``v`` now, each read back to ``v``, sorted (`_lib_node` picks one)."""
    # (what the indexes answer is the same while they took in no module anew: review
    # 230, a library binding a name after the first key; any module's, while as many
    # are loaded)
    now = (holders_epoch(type(v) is types.FunctionType), len(sys.modules) if any_module else 0)
    e = _LIB_NAMES.get((id(v), any_module))
    if e is not None and e[0] is v and e[2] == now:
        if all(_resolve(*h) is v for h in e[1]):
            return e[1]
    found = library_holders(v)
    if any_module and not found:
        # (a library's sentinel is named by the library even where the program holds
        # it too: a program's own ``object()`` under the same user name is another
        # object to the library's identity tests: review 50)
        for name, m in items(sys.modules):
            d = module_dict(m)
            if d is None:
                continue
            found += [(name, k) for k, x in items(d) if x is v]
        found = [h for h in found if _resolve(*h) is v]  # (``globals()["a.b"]``: review 143)
    got = tuple(sorted(set(found)))
    if got or not any_module:  # (library namespaces are taken as fixed; a program's are not)
        _LIB_NAMES[(id(v), any_module)] = (v, got, now)
    return got


def _lib_node(names: tuple) -> tuple:
    """A library object by one of its names: the least of those its module's import
    bound to it (`_snapshots.unchanged`: an alias the library, or a module imported
    in one process only, points elsewhere later, ``CURRENT = MODE_A`` then
    ``MODE_B``, names another object: review 144), a module attribute before a
    class's or an instance's (whose rebinding the snapshot does not see); with the
    names that module holds it under and what it is (`looks`: a rebinding before
    pcache started, in any form, review 176). Not its names in other modules: which
    are loaded when a call is keyed differs between a process that traced and one
    that was served."""
    files = {_file(m) for m, _ in names}  # (re-exported: ``pkg.H.CUR``, review 146)
    kept = [h for h in names if unchanged(*h) and not _rebinds(*h, files)]
    if not kept:
        raise NoReuse("persist-identity:rebound")
    m, a = min([h for h in kept if "." not in h[1]] or kept)
    same = tuple(sorted(x for k, x in names if k == m))
    return ("lib", m, a, _provider(m), same, looks(_resolve(m, a)))


def _bound(module: str, qual: str) -> bool:
    """A library class's module and qualified name name it in any process only while
    they hold what the module's import bound them to and no code of the library's
    rebinds them (two class statements of one name, the library's API pointing the
    name at the other, another module's assignment: review 170). A program's class
    is keyed by its content besides."""
    if not is_library_module(sys.modules.get(module)):
        return True
    file = _file(module)  # (each part: ``Outer.Mode = ...`` rebinds the inner one, review 173)
    return unchanged(module, qual) and not (
        file and any(stores_global(file, p) for p in qual.split("."))
    )


def _rebinds(module: str, path: str, files: set) -> bool:
    """Whether library code may rebind a part of ``path`` (``global X; X = ...``,
    ``H.x = ...``, ``setattr`` by name: `rebinds_global`): a rebinding made before
    pcache was enabled, when the snapshot was taken, and an attribute's, which the
    snapshot does not hold (review 145). The module's global by its own file; an
    attribute by those of every module holding the object (``files``) and of the
    modules defining each class on the path, its bases and metaclass (``pkg.H.CUR``,
    whose ``H.use`` is in ``pkg._core``: review 146; a mixin's ``cls.CUR = m``:
    review 148)."""
    file = _file(module)
    if file == "":  # (a builtin module has no code to rebind it: ``math``)
        return False
    first, *rest = path.split(".")
    if file is None or first not in _IMPORT_NAMES and rebinds_global(file, first):
        return True
    if not rest:
        return False
    owners, bases = {file, *files}, set()
    for i in range(1, len(rest) + 1):  # (each class on the path, an instance's class)
        o = _resolve(module, ".".join([first, *rest[: i - 1]]))
        t = o if is_a(o, type) else type(o)
        owners.add(_file(names(t)[2]) if type(names(t)[2]) is str else None)
        for k in (*mro(t)[1:], *mro(type(t))):  # (its bases' and metaclass's: review 148)
            mod = names(k)[2]
            f = _file(mod) if type(mod) is str else None
            bases.add(f if f and f.endswith((".py", ".pyc")) else "")  # (C: no code read)
    if None in owners:
        return True
    rest = [part for part in rest if part[:1] != "<"]
    if any(rebinds_global(f, part) for f in owners if f for part in rest):
        return True
    # (a dunder name a base class or metaclass sets is its class machinery's, set
    # when each class is made: equinox's ``cls.__abstractvars__``, not a mode)
    plain = [part for part in rest if not (part[:2] == "__" == part[-2:])]
    return any(rebinds_global(f, part) for f in bases - owners if f for part in plain)


def _file(module: str) -> str | None:
    """Module ``module``'s source file; "" for a builtin module; None if it has none."""
    file = (module_dict(sys.modules.get(module)) or {}).get("__file__")
    if type(file) is str:
        return file
    return "" if module in sys.builtin_module_names else None


#: What the import system binds in a module, which a library's ``f.__name__ = ...``
#: (a function's, a class's) does not rebind: ``rebinds_global`` reads every
#: attribute store of the name as one
_IMPORT_NAMES = frozenset({
    "__name__", "__file__", "__package__", "__spec__", "__loader__", "__path__",
    "__doc__", "__cached__", "__builtins__",
})  # fmt: skip


def library_value(ns: dict, name: str, v: Any) -> tuple:
    """A value the program reads from library namespace ``ns`` itself: refused where
    the library's code may rebind that name (review 180), else with the names its
    module holds it under and what it is (a rebinding before pcache started, in a
    form no reading of that code sees, gives another key: review 178)."""
    mod = ns.get("__name__")
    if type(mod) is not str or _rebinds(mod, name, set()):
        raise NoReuse(f"persist-library-rebinds:{name}")
    return tuple(sorted(k for k, x in items(ns) if x is v and type(k) is str)), looks(v)


def library_name(v: Any) -> tuple | None:
    """(module, attribute) a loaded library module holds ``v`` under (the least)."""
    got = _library_names(v)
    return got[0] if got else None


def resolve_name(module: str, qual: str) -> Any:
    """What `library_name` named, read back (None if nothing is there)."""
    return _resolve(module, qual)


def library_primitive_name(p: Any) -> str | None:
    """``lib:module:attribute`` of an installed library's primitive in a stored
    jaxpr (JAX's are named without the prefix: `pcache._compat.jaxpr_codec`)."""
    lib = library_name(p)
    if lib is None or not unchanged(*lib):  # (a name rebound since its import: `_snapshots`)
        return None
    return "lib:" + ":".join(lib)


def library_primitive(path: str) -> Any:
    """The primitive `library_primitive_name` named, if that is still the least name
    libraries hold it under; else None."""
    module, _, attr = path[len("lib:") :].partition(":")
    got = _resolve(module, attr) if module and attr else None
    if not is_a(got, _compat.Primitive) or library_primitive_name(got) != path:
        return None
    return got


__all__ = [
    "library_name",
    "library_primitive",
    "library_primitive_name",
    "library_value",
    "resolve_name",
]
