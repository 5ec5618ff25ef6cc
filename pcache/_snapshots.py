"""What each module's namespace held when its import finished.

A persisted trace names a library's object by the module attribute holding it (a
sentinel, a constant the library tests by identity, a class, a primitive:
`pcache._out_tree`). Such a name means the same object in two processes only while
it still holds what the module's import put there: a library that rebinds it
later (``set_mode(...)``, ``globals()[name] = ...``, a loop of ``setattr``, another
module's assignment, in any of the forms no reading of its code can enumerate) keeps
the old object wherever its code captured it before. So a name is stored, and
read back, only where it holds the very object its module held when its import
finished (`unchanged`), in both processes: with the same versions and settings
(in the key) imports bind the same names to corresponding objects.

The snapshot of a module imported after `start` is taken by a finder at the front
of ``sys.meta_path`` that hands the import to the other finders and wraps the
loader they return: the module's body runs under the interpreter's own loader
(``__loader__`` and ``__spec__.loader`` are the real one again before it runs) and
its namespace is copied (shallowly) when the body returns. Modules already loaded
at `start` are copied then (a name rebound before `start` is seen only by
`pcache._provenance.rebinds_global`). A module without a snapshot, or a name it did
not hold then, is not named: nothing is persisted by it.

Only with persisted traces on (`start` from `pcache._install`). JAX-free.
"""

from __future__ import annotations

import sys
import threading
import types
from importlib.machinery import ModuleSpec
from typing import Any

from pcache._introspect import Override, inst_dict, is_a
from pcache._memos import after_fork

_SNAPSHOTS: dict[str, tuple] = {}  # module name -> (the module, its namespace copied)
_LOCAL = threading.local()  # .busy: this thread is asking the other finders


def _copy(name: Any, m: Any) -> None:
    if type(name) is not str or not is_a(m, types.ModuleType):
        return
    if name in _SNAPSHOTS and _SNAPSHOTS[name][0] is m:
        return  # (a reload keeps the first snapshot: every name it rebinds reads as changed)
    try:
        d = inst_dict(m)
    except Override:
        return
    if type(d) is dict and sys.modules.get(name) is m:
        _SNAPSHOTS[name] = (m, d.copy())


def _restore(loader: Any, module: Any) -> Any:
    """Put the real loader back on ``module`` before its body runs; its spec."""
    inner = loader._inner
    spec = getattr(module, "__spec__", None)
    if getattr(spec, "loader", None) is loader:
        spec.loader = inner
    if getattr(module, "__loader__", None) is loader:
        module.__loader__ = inner
    return spec


def _copied(spec: Any, module: Any) -> None:
    try:
        _copy(getattr(spec, "name", None), module)
    except Exception:  # (never fail an import: the module just has no snapshot)
        pass


# `_Loader.exec_module` and `Finder.find_spec`, compiled under the file name of the
# import system's own frames: the interpreter trims them from a failing import's
# traceback with the rest of them (a module's body raising, a module not found), and
# `warnings` skips them (``_is_internal_frame``), so a library's import-time
# ``warnings.warn(..., stacklevel=2)`` names the importing line, as without pcache
# (reviews 130, 131). (Their code's qualified names say whose they are.)
_EXEC = """
def exec_module(self, module):
    spec = _restore(self, module)
    self._inner.exec_module(module)
    _copied(spec, module)


def find_spec(self, name, path=None, target=None):
    finders = tuple(sys.meta_path)
    mine = next((i for i, f in enumerate(finders) if f is self), None)
    if getattr(_LOCAL, "busy", False) or mine is None:
        return None
    later = [f for f in finders[mine + 1 :] if not isinstance(f, Finder)]
    if not all(hasattr(f, "find_spec") for f in later):
        return None  # (a legacy finder: the import system asks them all itself)
    _LOCAL.busy = True
    try:  # (only those after this one: the import system asked those before)
        spec = None
        for finder in later:
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                break
    finally:
        _LOCAL.busy = False
    importing = _importing()
    if spec is None and importing:
        # (what the import system would say next, after asking them again: each
        # finder asked once, as without pcache, review 130)
        raise ModuleNotFoundError(f"No module named {name!r}", name=name)
    loader = getattr(spec, "loader", None)
    if not importing:
        return spec  # (``importlib.util.find_spec``: its caller gets the real loader)
    if loader is not None and type(loader) is not _Loader and hasattr(loader, "exec_module"):
        try:
            spec.loader = _Loader(loader)
        except Exception:  # (a spec that refuses: imported as found, no snapshot)
            pass
    return spec
"""
_space: dict = {"sys": sys, "_LOCAL": _LOCAL, "_restore": _restore, "_copied": _copied}
exec(compile(_EXEC, "<frozen importlib._bootstrap_external>", "exec"), _space)
for _name, _owner in (("exec_module", "_Loader"), ("find_spec", "Finder")):
    _f = _space[_name]
    _f.__code__ = _f.__code__.replace(co_qualname=f"pcache._snapshots.{_owner}.{_name}")


class _Loader:
    """The loader another finder chose, run as itself; copies the namespace after."""

    def __init__(self, inner: Any):
        self._inner = inner

    def create_module(self, spec: Any) -> Any:
        return self._inner.create_module(spec)

    exec_module = _space["exec_module"]

    def __getattr__(self, name: str) -> Any:
        if name == "_inner":  # (a copy not yet initialized)
            raise AttributeError(name)
        return getattr(self._inner, name)


class Finder:
    """Finds nothing itself: asks the finders after it, as the import system would,
    and wraps the loader of what they found (`_Loader`)."""

    find_spec = _space["find_spec"]


def _importing() -> bool:
    """Whether the import system itself asked (its ``_find_spec`` for an import
    statement, ``__import__`` or ``importlib.import_module``), not a program looking a
    module up (review 129: ``importlib.util.find_spec(name).loader`` stays the real one)."""
    try:
        frame = sys._getframe(3)  # (this, `find_spec`, ``_find_spec``, its caller)
    except ValueError:
        return False
    return frame.f_code.co_name == "_find_and_load_unlocked" and "importlib._bootstrap" in (
        frame.f_code.co_filename
    )


_space.update(Finder=Finder, _Loader=_Loader, _importing=_importing)
FINDER = Finder()
_START = threading.Lock()


@after_fork
def _unlock() -> None:
    global _START  # (one another thread held at the fork is never released here)
    _START = threading.Lock()


def start() -> None:
    """Copy every loaded module's namespace and copy each later one's when its
    import finishes (idempotent)."""
    with _START:
        if any(f is FINDER for f in sys.meta_path):
            return
        for name, m in tuple(sys.modules.items()):
            try:  # (the namespace, not ``getattr``: a lazy module would load itself)
                d = inst_dict(m) if is_a(m, types.ModuleType) else None
            except Override:
                continue
            spec = d.get("__spec__") if type(d) is dict else None
            if type(spec) is ModuleSpec and getattr(spec, "_initializing", False) is True:
                continue  # (its body is still running: copied by nobody, never named)
            _copy(name, m)
        sys.meta_path.insert(0, FINDER)


def stop() -> None:
    """Take the finder out of ``sys.meta_path`` (pcache switched off, or on without
    persisted traces): imports run as without pcache. The snapshots stay; a module
    imported meanwhile is copied at the next `start`, as one loaded before the first."""
    with _START:
        if any(f is FINDER for f in sys.meta_path):
            sys.meta_path[:] = [f for f in sys.meta_path if f is not FINDER]


def unchanged(module: str, attr: str) -> bool:
    """Whether ``module`` holds under ``attr`` (its first part: ``Class.x`` is a class
    attribute, not looked at) the very object it held when its import finished."""
    got = _SNAPSHOTS.get(module)
    m = sys.modules.get(module)
    if got is None or got[0] is not m:
        return False  # (none, or another module of that name: imported again since)
    snap = got[1]
    top = attr.partition(".")[0]
    try:
        d = inst_dict(m)
    except Override:
        return False
    return type(d) is dict and top in snap and top in d and d[top] is snap[top]


def started() -> bool:
    return any(f is FINDER for f in sys.meta_path)


__all__ = ["FINDER", "Finder", "start", "started", "stop", "unchanged"]
