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
`pcache._provenance.rebinds_global`). With a library module's namespace go the dicts
of the classes and instances it holds (`_deep`), so that a name's every part is
checked, not only its first. A module without a snapshot, or a name it did
not hold then, is not named: nothing is persisted by it.

Only with persisted traces on (`start` from `pcache._install`). JAX-free.
"""

from __future__ import annotations

import sys
import threading
import types
import zipimport
from importlib import _bootstrap_external, machinery
from importlib.machinery import ModuleSpec
from typing import Any

from pcache import _module_watch
from pcache._holders import _BOOKKEEPING, FUNC_PART, TYPE_PART
from pcache._introspect import (
    Override,
    cdict,
    class_ids,
    dict_reader,
    flags,
    inst_dict,
    is_a,
    unwatched,
)
from pcache._memos import after_fork, collector_paused
from pcache._usercode import _library_file, is_library_module

#: module name -> (the module, its namespace copied, whether that is its import's state)
_SNAPSHOTS: dict[str, tuple] = {}
#: the names another module object was copied under since the first (a module
#: imported again: whoever held the first reads another namespace than the name's)
_REPLACED: set[str] = set()
#: id -> (a class or instance a library module held when its import finished, its
#: own dict copied then or None, its class then, whether provisional, whether
#: trusted): `_deep`
_DEEP: dict[int, tuple] = {}
_LOCAL = threading.local()  # .busy: this thread is asking the other finders


def _copy(name: Any, m: Any, late: Any = None, library: bool | None = None) -> set:
    """Copy module ``m``'s namespace (and, for a library module, what it holds:
    `_deep`); the ids of the objects copied. ``library``: `is_library_module`'s
    answer, asked before (it may call the program's path finders: review 161)."""
    if type(name) is not str or not is_a(m, types.ModuleType):
        return set()
    if name in _SNAPSHOTS and _SNAPSHOTS[name][0] is m:
        return set()  # (a reload keeps the first snapshot: every name it rebinds reads as changed)
    try:
        d = inst_dict(m)
    except Override:
        return set()
    if type(d) is dict and sys.modules.get(name) is m:
        # (a module copied after a `stop`, or whose import ran program code, may hold
        # what the program rebound, ``globals()[k] = v`` through the library's API:
        # none of its names is import state, review 158)
        old = _SNAPSHOTS.get(name)
        if old is not None and old[0] is not m:
            _REPLACED.add(name)
        d = _SNAPSHOTS[name] = (m, d.copy(), not isinstance(late, _Every))
        _module_watch.note(d[1])  # (the modules it holds: watched while they live)
        if is_library_module(m) if library is None else library:
            return _deep(name, d[1], late)
    return set()


def _distrust(name: Any, ids: set) -> None:
    """What `_copy` copied as import state, taken back: program code ran while it
    copied (review 161)."""
    e = _SNAPSHOTS.get(name) if type(name) is str else None
    if e is not None:
        _SNAPSHOTS[name] = (e[0], e[1], False)
    for i in ids:
        got = _DEEP.get(i)
        if got is not None:
            _DEEP[i] = (*got[:4], False)


def _deep(module: str, d: dict, late: Any = None) -> set:
    """Copy the dict of every class library module namespace ``d`` holds, at any
    depth (a nested class, a class attribute's class, a metaclass, an instance's
    class), and of every instance it or those classes hold (one level: what
    `pcache._holders` indexes), each once (but a class a circular import reached
    while its own module's body ran, again when that body returns): a name's deeper
    parts (``H.CUR``, ``OBJ.mode``, ``OBJ.<type>.x``) are checked against what import
    bound as its first is (`unchanged`), however the program or the library rebinds
    them later (``setattr`` through a ``partial``, a base class's ``cls.CUR = ...``, a
    computed name: review 148). ``late``: for an import after `start`, the ids of
    the classes alive when it began (`class_ids`): it may reach an object made before
    it, that the program changed meanwhile (review 149: an instance a library kept in
    a list, re-exported by a module imported later; review 150: a class whose
    ``__module__`` names the new module; review 151: an old class a metaclass hands
    back for a class statement). What it reaches first is trusted only where it is a
    class made since that import began, or an instance of one."""
    plain = _PLAIN
    todo = [
        x
        for k, x in d.items()
        if id(unwatched(type(x))) not in plain and (type(k) is not str or k not in _IMPORT_STATE)
    ]
    readers: dict = {}
    seen: set = set()  # (ids copied by this call: its objects stay alive meanwhile)
    while todo:
        x = todo.pop()
        if id(x) in seen:
            continue
        seen.add(id(x))
        tx = type(x)
        cls = flags(tx) & _TYPE_SUBCLASS
        got = _DEEP.get(id(x))
        mine = cdict(x).get("__module__") if cls else None
        mine = mine if type(mine) is str else None
        if got is not None and got[0] is x and not (got[3] and mine == module):
            continue
        if cls:
            own: Any = cdict(x).copy()
            todo += [
                y
                for a, y in own.items()
                if id(type(y)) not in plain and (type(a) is not str or a not in _BOOKKEEPING)
            ]
        else:
            reader = readers.get(id(tx), _DEEP)  # (ids: a metaclass's hash is its code)
            if reader is _DEEP:
                reader = readers[id(tx)] = dict_reader(tx)
            own = None
            if reader is not None and reader is not Override:
                own = reader.__get__(x, tx)
                own = own.copy() if type(own) is dict else None
        # (provisional: its own module's body is still running, a circular import
        # reached it: copied again when that body returns; never a class whose
        # module is imported later, after the program ran)
        trusted = late is None or id(x if cls else tx) not in late
        _DEEP[id(x)] = (x, own, tx, mine is not None and mine != module and _running(mine),
                        trusted)  # fmt: skip
        todo.append(tx)
    return seen


def _running(name: str) -> bool:
    """Whether module ``name``'s body is running (a circular import's)."""
    m = sys.modules.get(name)
    try:
        d = inst_dict(m) if m is not None else None
    except Override:
        return False
    spec = d.get("__spec__") if type(d) is dict else None
    return type(spec) is ModuleSpec and vars(spec).get("_initializing") is True


_C_LOADERS = (machinery.ExtensionFileLoader, machinery.BuiltinImporter, machinery.FrozenImporter)
_SYSTEM_CREATE = frozenset(
    getattr(c.create_module, "__func__", c.create_module)
    for c in (*_C_LOADERS, machinery.SourceFileLoader, machinery.SourcelessFileLoader,
              zipimport.zipimporter, _bootstrap_external._NamespaceLoader)
)  # fmt: skip
#: what the import system binds in a module before its body runs (`module_from_spec`)
_SYSTEM_NAMES = frozenset(
    ("__name__", "__doc__", "__package__", "__loader__", "__spec__", "__path__", "__file__",
     "__cached__")
)  # fmt: skip


def _prefilled(loader: Any, module: Any) -> bool:
    """Whether code not the interpreter's may have bound names in ``module`` before
    its body runs: the loader's own ``create_module`` (a program's loader handing the
    import a module holding a name of its choice, review 177), or anything beyond the
    import system's names in a namespace no C initialization filled. Its names are
    then no import's state."""
    if not loader.__dict__.get("_pcache_created", False):
        return True
    if type(loader._inner) in _C_LOADERS:
        return False
    try:
        d = inst_dict(module)
    except Override:
        return True
    return type(d) is not dict or any(k not in _SYSTEM_NAMES for k in d)


def _restore(loader: Any, module: Any) -> Any:
    """Put the real loader back on ``module`` before its body runs; its spec."""
    inner = loader._inner
    spec = getattr(module, "__spec__", None)
    if getattr(spec, "loader", None) is loader:
        spec.loader = inner
    if getattr(module, "__loader__", None) is loader:
        module.__loader__ = inner
    return spec


class _Every:
    """Taken as every class's id: none is new (`class_ids` failed)."""

    def __contains__(self, _: Any) -> bool:
        return True


def _began(spec: Any) -> list:
    """`_begin`, with the collector paused: a finalizer of the program's run before
    the profile function is set would go unseen (review 157)."""
    with collector_paused():
        return _begin(spec)


def _begin(spec: Any) -> list:
    """This import's frame, ``[the ids of the classes alive as it began, whether
    program code ran while it ran]``, pushed on this thread's stack. Classes are read
    afresh (`class_ids`) where program code may have run since they last were: at an
    outermost import, under a program module's import, after program code ran (seen by
    `_watch`) or a module was added to ``sys.modules`` without this finder (another
    finder's, another thread's, a module put there by hand); else the import nested
    in a library module's shares the last reading (only library code ran since).
    Program code run while an import runs marks every import on the stack: a program
    module imported (review 153: the program's module, imported after pcache started,
    imports a library, changes it through its API, then imports a module of it
    re-exporting what it changed), or called (review 154: a settings module the
    library imports and configures itself with, loaded before by the program)."""
    here = _LOCAL.__dict__
    stack = here.setdefault("stack", [])
    origin = getattr(spec, "origin", None)
    if origin is None and getattr(spec, "submodule_search_locations", None) is not None:
        origin = "namespace"  # (a namespace package: no body, no code runs)
    if not (_library_file(origin) or origin in ("built-in", "frozen", "namespace")):
        _program_ran()
        frame = [None, True, False]
    else:
        if here.get("stale", True) or not stack or stack[-1][0] is None:
            here["before"] = _Every()
            try:
                here["before"] = class_ids()
            except Exception:  # (never fail an import: then nothing it reaches is new)
                pass
            here["stale"] = False
        elif here.get("modules") != len(sys.modules) - 1:
            here["stale"] = True
            return _begin(spec)
        frame = [here["before"], not _watching(), _is_jax(getattr(spec, "name", None))]
        if frame[2] and not any(f[2] for f in stack):
            for fn in BEGAN:  # (the outermost JAX import: what came before is not its)
                fn()
    here["modules"] = len(sys.modules)  # (this module is in it while its body runs)
    stack.append(frame)
    return frame


def _watching() -> bool:
    """Watch this thread's calls for program code (`_watch`, a profile function) while
    a library module's import runs; False where what runs may go unseen: another
    profile function is set (a profiler's: kept), a trace function (the interpreter
    runs no profile function inside it, and a program's may change anything: review
    156), or an audit hook was added since pcache started (the same inside it)."""
    if _HOOKED or sys.gettrace() is not None:
        return False
    now = sys.getprofile()
    if now is None:
        _set(_watch)
        return True
    return now is _watch


def _set(fn: Any) -> None:
    here = _LOCAL.__dict__
    here["setting"] = True
    try:
        sys.setprofile(fn)
    finally:
        here["setting"] = False


def _audit(event: str, args: tuple) -> None:
    """Another profile or trace function set, or ours taken out, while an import runs
    in this thread (a library's own ``sys.setprofile(None)`` around a call: review
    155), or an audit hook added (whose code runs unseen: review 156): what ran
    meanwhile went unseen. (Never raises: an audit hook's error fails the event.)"""
    if event in _AUDITED:
        try:
            here = _LOCAL.__dict__
            if event == "sys.addaudithook":
                _HOOKED.append(True)
            if here.get("stack") and not here.get("setting"):
                _program_ran()
        except Exception:
            pass


_AUDITED = frozenset({"sys.setprofile", "sys.settrace", "sys.addaudithook"})
_AUDITING: list = []  # (non-empty once `_audit` is added: for the process's life)
_HOOKED: list = []  # (non-empty once an audit hook was added after it: nothing is seen)


def _watch(frame: Any, event: str, arg: Any) -> None:
    """The profile function while a library module's import runs: code of a file
    outside the libraries is called, or resumed (a generator of the program's)."""
    if event != "call":
        return
    try:
        file = frame.f_code.co_filename
        library = _FILES.get(file)
        if library is None:
            with collector_paused():  # (a finalizer run in here would go unseen)
                library = _FILES[file] = file[:1] == "<" or _library_file(file)
        if library and file[:1] == "<" and not _generated_library(frame):
            library = False
        if not library:
            _program_ran()
    except Exception:
        _program_ran()


_FILES: dict = {}  # file -> whether a library's (the path rule's verdict: fixed per path)
_NEWLOCALS = 0x0002  # CO_NEWLOCALS: a function's code (a module-level snippet has none)


def _library_path(dotted: str) -> bool:
    """Whether a loaded library module holds ``dotted`` (``module.Class``): the
    longest prefix that names a loaded module is one whose file is a library's."""
    parts = dotted.split(".")
    for i in range(len(parts) - 1, 0, -1):
        m = sys.modules.get(".".join(parts[:i]))
        if m is not None:
            d = inst_dict(m)
            f = d.get("__file__") if type(d) is dict else None
            return type(f) is str and bool(_library_file(f))
    return False


def _generated_library(frame: Any) -> bool:
    """Code made from a string (a ``<...>`` file) runs as whose? A library's where it
    runs in a library module's namespace (a library dataclass's generated methods),
    is the interpreter's frozen module, a snippet run at module level (an ``exec``:
    the program's own call of it would be seen), a namedtuple's methods, or a file a
    library's code generator names (equinox's ``<generated_flatten_X>``: templates
    that read, write nothing); attrs' methods are their class's module's (it names it
    in the file name). The program's: a program dataclass's methods, run in the
    program's module (review 161) or, ``<string>``, in a namespace of their own when
    its module is not imported (review 163)."""
    g, code = frame.f_globals, frame.f_code
    file = code.co_filename
    if g is _space:  # (pcache's own finder: review 164)
        return True
    name = g.get("__name__") if type(g) is dict else None
    m = sys.modules.get(name) if type(name) is str else None
    if file.startswith("<frozen "):  # (the interpreter's: in a module it holds frozen,
        # under its name or the file's: ``_collections_abc`` names itself collections.abc)
        for f in (m, sys.modules.get(file[len("<frozen ") : -1])):
            d = inst_dict(f) if f is not None else None
            if d is g and getattr(d.get("__spec__"), "origin", None) == "frozen":
                return True
        return False
    if m is None or inst_dict(m) is not g:
        snippet = code.co_name == "<module>" and not code.co_flags & _NEWLOCALS
        if snippet or file.startswith("<attrs generated "):
            # (attrs: "<attrs generated NAME MODULE.QUALNAME>")
            owner = file.rpartition(" ")[2][:-1] if file[-1:] == ">" else ""
            return snippet or _library_path(owner)
        # (`collections.namedtuple`'s own: a namespace of its making)
        named_tuple = type(name) is str and name.startswith("namedtuple_") and m is None
        return named_tuple or file != "<string>"
    file = g.get("__file__")
    got = _FILES.get(file) if type(file) is str else False
    if got is None:
        with collector_paused():
            got = _FILES[file] = _library_file(file)
    return got


def _program_ran() -> None:
    """Program code ran: every import running in this thread may bind what it
    changed; the classes alive are read afresh for the next. (Nothing more to watch
    for these imports: the profile function is taken out until the next begins.)"""
    here = _LOCAL.__dict__
    for frame in here.get("stack", ()):
        frame[1] = True
    here["stale"] = True
    if sys.getprofile() is _watch:
        _set(None)


def _ended(frame: list) -> None:
    here = _LOCAL.__dict__
    stack = here.get("stack", [])
    while stack:  # (this import's and any nested one's left by an unusual loader)
        if stack.pop() is frame:
            break
    here["modules"] = len(sys.modules)
    if not any(f[0] is not None for f in stack) and sys.getprofile() is _watch:
        _set(None)  # (no library module's import runs: the program's code does)
    if not stack:
        here["stale"] = True  # (the program runs next)


def _copied(spec: Any, module: Any, frame: list) -> None:
    """Copy the module's namespace as its import left it, with the collector paused:
    a collection in the walk would run the program's finalizers and ``gc.callbacks``
    between the verdict and the copies, changing what is copied as trusted (review
    157); one after the copy changes what the copy is compared with."""
    try:
        with collector_paused():
            # (first what may run the program's code, a spec's property, its path
            # finders: seen, marking the frame, review 161)
            name = getattr(spec, "name", None)
            library = is_a(module, types.ModuleType) and is_library_module(module)
            if frame[0] is not None and sys.getprofile() is not _watch:
                frame[1] = True  # (the profile function was replaced meanwhile: unseen)
            late = _Every() if frame[1] or frame[0] is None else frame[0]
            ids = _copy(name, module, late=late, library=library)
            if frame[1] and not isinstance(late, _Every):
                _distrust(name, ids)  # (program code ran while it copied, after all)
            elif _clean() and frame[2]:
                for fn in IMPORTED:
                    fn(name, _clean)
    except Exception:  # (never fail an import: the module just has no snapshot)
        pass


#: Called with a JAX module's name when its import finished, no program code run
#: since the outermost JAX import running began, and `_clean` (`pcache._canon_rules.
#: imported`: JAX's modules' registrations); and as that outermost one begins
IMPORTED: list = []
BEGAN: list = []


def _clean() -> bool:
    """No program code ran while any import on this thread's stack ran."""
    return not any(f[1] for f in _LOCAL.__dict__.get("stack", ()))


def _is_jax(name: Any) -> bool:
    return type(name) is str and (name == "jax" or name.startswith(("jax.", "jaxlib.")))


# `_Loader.exec_module` and `Finder.find_spec`, compiled under the file name of the
# import system's own frames: the interpreter trims them from a failing import's
# traceback with the rest of them (a module's body raising, a module not found), and
# `warnings` skips them (``_is_internal_frame``), so a library's import-time
# ``warnings.warn(..., stacklevel=2)`` names the importing line, as without pcache
# (reviews 130, 131). (Their code's qualified names say whose they are.)
_EXEC = """
def exec_module(self, module):
    spec = _restore(self, module)
    frame = _began(spec)
    try:
        if _prefilled(self, module):
            _program_ran()
        self._inner.exec_module(module)
        _copied(spec, module, frame)
    finally:
        _ended(frame)


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
_space: dict = {"sys": sys, "_LOCAL": _LOCAL, "_restore": _restore, "_copied": _copied,
               "_began": _began, "_ended": _ended, "_prefilled": _prefilled,
               "_program_ran": _program_ran}  # fmt: skip
exec(compile(_EXEC, "<frozen importlib._bootstrap_external>", "exec"), _space)
for _name, _owner in (("exec_module", "_Loader"), ("find_spec", "Finder")):
    _f = _space[_name]
    _f.__code__ = _f.__code__.replace(co_qualname=f"pcache._snapshots.{_owner}.{_name}")


class _Loader:
    """The loader another finder chose, run as itself; copies the namespace after."""

    def __init__(self, inner: Any):
        self._inner = inner

    def create_module(self, spec: Any) -> Any:
        create = self._inner.create_module
        self._pcache_created = getattr(create, "__func__", create) in _SYSTEM_CREATE
        return create(spec)

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
_STOPPED: list = []  # (non-empty once `stop` took the finder out)


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
        if not _AUDITING:
            _AUDITING.append(True)
            sys.addaudithook(_audit)
        for name, m in tuple(sys.modules.items()):
            try:  # (the namespace, not ``getattr``: a lazy module would load itself)
                d = inst_dict(m) if is_a(m, types.ModuleType) else None
            except Override:
                continue
            spec = d.get("__spec__") if type(d) is dict else None
            if type(spec) is ModuleSpec and getattr(spec, "_initializing", False) is True:
                continue  # (its body is still running: copied by nobody, never named)
            # (after a `stop`: a module imported meanwhile may hold what the program
            # changed before: a late import's, none of whose classes is new, review 152)
            _copy(name, m, late=_Every() if _STOPPED else None)
        sys.meta_path.insert(0, FINDER)


def stop() -> None:
    """Take the finder out of ``sys.meta_path`` (pcache switched off, or on without
    persisted traces): imports run as without pcache. The snapshots stay; a module
    imported meanwhile is copied at the next `start`, as a late import none of whose
    classes is new (`_deep`)."""
    with _START:
        if any(f is FINDER for f in sys.meta_path):
            sys.meta_path[:] = [f for f in sys.meta_path if f is not FINDER]
            _STOPPED.append(True)


def unchanged(module: str, attr: str) -> bool:
    """Whether each part of ``module``'s path ``attr`` (``H.CUR``, ``OBJ.<type>.x``:
    `pcache._holders`) holds the very object it held when the import of a library
    module holding it finished (`_deep`), the first as ``module``'s did."""
    got = _SNAPSHOTS.get(module)
    m = sys.modules.get(module)
    if got is None or got[0] is not m:
        return False  # (none, or another module of that name: imported again since)
    v: Any = m
    own = got[1]
    for part in attr.split("."):
        if part == FUNC_PART:  # (what a static method wraps: fixed with it)
            if type(v) is not staticmethod and type(v) is not classmethod:
                return False
            v = v.__func__
            continue
        e = _DEEP.get(id(v)) if v is not m else (m, own, type(m), False, got[2])
        if e is None or e[0] is not v or not e[4]:
            return False  # (not held by a library module when its import finished)
        if part == TYPE_PART:
            if type(v) is not e[2]:
                return False
            v = e[2]
            continue
        try:
            now = cdict(v) if flags(type(v)) & _TYPE_SUBCLASS else inst_dict(v)
        except Override:
            return False
        then = e[1]
        if type(then) is not dict or part not in then or now is None or part not in now:
            return False
        if now[part] is not then[part]:
            return False
        v = then[part]
    return True


_TYPE_SUBCLASS = 1 << 31  # (Py_TPFLAGS_TYPE_SUBCLASS)
#: Objects with no namespace a name's part reads (a function, a module: named by
#: what they are; builtin values; what a static method wraps is fixed with it)
_PLAIN = frozenset(
    map(id, (
        types.FunctionType, types.ModuleType, types.BuiltinFunctionType, int, float,
         complex, str, bytes, bool, type(None), tuple, list, dict, set, frozenset,
         staticmethod, classmethod, property, types.MemberDescriptorType,
         types.GetSetDescriptorType, types.MethodDescriptorType,
         types.WrapperDescriptorType, types.ClassMethodDescriptorType,
    ))
)  # fmt: skip


#: A module's import state and a class's bookkeeping: no name's part (`pcache._holders`)
_IMPORT_STATE = frozenset({"__spec__", "__loader__", "__builtins__"})


def sole(name: str) -> bool:
    """Whether the module ``sys.modules`` holds under ``name`` is the only one pcache
    copied under it: no module of that name was imported again (or put in its place)
    since, which code that held the first would still read (review 221: a trace's
    reads of ``m.K``, checked by name, where ``m`` was the module a library held)."""
    got = _SNAPSHOTS.get(name)
    return got is not None and got[0] is sys.modules.get(name) and name not in _REPLACED


def reloaded(name: str, m: Any) -> bool:
    """Whether module ``m`` was executed again since pcache copied it
    (``importlib.reload`` gives it a new ``__spec__``): functions made from what it
    ran before may be held elsewhere, which its source now says nothing of (review
    169)."""
    got = _SNAPSHOTS.get(name)
    if got is None or got[0] is not m:
        return False
    d = inst_dict(m)
    if type(d) is not dict or d.get("__spec__") is not got[1].get("__spec__"):
        return True
    # (its code run again into it, a loader's ``exec_module``: functions made anew,
    # review 171; or rebound by the program, as good as new to whoever held the old)
    return any(
        (type(v) is types.FunctionType or is_a(v, type)) and d.get(k) is not v
        for k, v in got[1].items()
    )


def started() -> bool:
    return any(f is FINDER for f in sys.meta_path)


__all__ = ["FINDER", "Finder", "sole", "start", "started", "stop", "unchanged"]
