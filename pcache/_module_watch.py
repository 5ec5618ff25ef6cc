"""What the program's code reads from library modules while a recorded trace runs.

The code scan (`pcache._usercode`, `pcache._guards`) guards what traced code reads
from a library module along the routes it models: a global's chain, an import, a
closure's free variable. Reviews 205-213 found, one after another, routes it did not
model (a module in a class attribute's tuple, in an object array, handed to the
program's callback by a library function, returned by a method), each a false hit:
what the program read through the module (``m.K``, which the library's own
``global K`` rebinds) was in no key. Here the reads are seen, whatever the route:
while a trace is recorded, every library module's class is a subclass of its own
whose ``__getattribute__`` notes each attribute the program's code (a frame of code
no library defines) reads from it, with the object it got, and hands the read on
unchanged. What was read becomes guards of the recorded trace (in process: the very
objects; across processes: `pcache._persist_key`'s description, refused where the
library may rebind the name), beside the key's own.

So a read is seen whatever object held the module: attribute reads by the program's
code (``m.K``, ``getattr(m, name)``, ``from m import K``, ``vars(m)`` as a read of
``__dict__``, which refuses the recording) go through the module's type. Not seen:
``object.__getattribute__(m, ...)`` (the scan refuses it where the program's code
or values hold it; one a library call returns while tracing is not seen, a
documented blind spot: review 229), what library code reads
(its own state: documented), a module imported while the trace runs (not watched
for it: the recording is refused, `stop`). JAX-free."""

from __future__ import annotations

import dis
import os
import sys
import threading
import types
import weakref
from operator import is_
from time import perf_counter  # (no read of a watched module's attribute here)
from typing import Any

from pcache._introspect import POSING, is_a, subclass
from pcache._memos import memo
from pcache._usercode import is_library_code, is_library_module, module_dict

_LOCAL = threading.local()  # .busy: pcache reads (not noted); .spent: see `stop`
#: the reads of each recording in progress: [(module, name, what it gave), ...]
_SINKS: list[list] = []
#: [(a recording's reads, how many modules were watched when it started), ...]
_STARTS: list[tuple] = []
_LOCK = threading.RLock()
#: (recordings in progress, [(module, its class before, watching class), ...], the
#: modules not watched as reads, the modules loaded when last swapped)
_ACTIVE: list = [0, [], [], None]
#: a module class -> the subclass that notes reads
_WATCHING: dict[type, type] = memo("module_watch.classes", {})
#: id(module) -> (module, whether a library's)
_LIBRARY: dict[int, tuple] = memo("module_watch.library", {})
_HOME = os.path.dirname(os.path.realpath(__file__)) + os.sep  # (pcache's package)
#: id(code) -> (code, whose: `_kind`)
_PROGRAM: dict[int, tuple] = memo("module_watch.program", {})
ABSENT = object()  # (what a read of a name the module lacks gave)
#: the instructions by which code itself reads an attribute (any other read a frame
#: shows is made by C code it called: `_direct`)
_READS = frozenset(
    dis.opmap[n]
    for n in ("LOAD_ATTR", "LOAD_METHOD", "IMPORT_FROM", "LOAD_SUPER_ATTR")
    if n in dis.opmap
)
#: the modules whose names C code the program calls reads by name (the import
#: system's ``builtins.__import__`` and ``importlib._bootstrap._handle_fromlist``;
#: numpy's ``ndarray.sum`` importing ``numpy._core._methods``): a read C code made
#: of any other module is a read of the
#: module object the program handed it (``"{0.K}".format(m)``, review 224), which no
#: name describes across processes, as the program's own reads (`watched`)
_C_READS_BY_NAME = ("builtins", "importlib._bootstrap", "numpy._core.", "numpy.core.")
#: [the modules when planned, `_plan`'s modules to watch, its problems]
_PLAN: list = [None, [], []]
_TRACKING: list = []  # (True once `_track_made` patched the import system)
#: the modules ``module_from_spec`` made (`_track_made`)
#: (by id: a module class may hash and compare as it likes, review 220)
_MADE: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
#: every module ``sys.modules`` held when pcache looked, while it lives: one the
#: program took out (popped, replaced by a new import) is still one a library may
#: hold and the program read through (review 222)
_SEEN: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
_NOTED = [0]  # (one more for each module `_MADE` or `note` adds: `_loaded`'s memo)
#: [``sys.modules``' values when `_loaded` last looked, `_NOTED` then, the modules
#: beyond them to watch]
_LOOKED: list = [None, -1, []]
#: JAX's own modules are not watched: JAX reads them all the time it traces (five in
#: six reads), what the program reads from them along the scan's routes is guarded,
#: and their state is JAX's (its settings are keyed)
_UNWATCHED = frozenset({"jax", "jaxlib", "pcache"})
_PCACHE = __name__.partition(".")[0] + "."


def _kind(frame: Any) -> str:
    """Whose code ``frame`` runs: "program", "library" or "pcache" (pcache's own
    modules' code, by its file: a program module named ``pcache.x`` is the
    program's, review 214)."""
    code = frame.f_code
    e = _PROGRAM.get(id(code))
    if e is None or e[0] is not code:
        busy, _LOCAL.busy = getattr(_LOCAL, "busy", False), True  # (pcache's reads: not
        t0 = perf_counter()  # noted, and no read of its own comes back here)
        try:
            g = frame.f_globals
            kind = "pcache" if _own(g, code) else "library" if is_library_code(g, code) else ""
            e = (code, kind or "program")
        finally:
            _LOCAL.busy = busy
            _LOCAL.spent = getattr(_LOCAL, "spent", 0.0) + perf_counter() - t0
        if len(_PROGRAM) > 16384:
            _PROGRAM.clear()
        _PROGRAM[id(code)] = e  # (kept alive: its id stays its own)
    return e[1]


def _own(g: dict, code: Any) -> bool:
    """Whether ``code`` is one of pcache's own modules' (its globals that module's,
    loaded from the file of pcache's package its name names, and the code from that
    file: review 220, a program's module named ``pcache.zz`` whose ``__file__`` and
    code claim a path in pcache's directory where no file of that name is)."""
    name = g.get("__name__")
    if type(name) is not str or not (name + ".").startswith(_PCACHE):
        return False
    f = g.get("__file__")
    if module_dict(sys.modules.get(name)) is not g or type(f) is not str:
        return False
    parts = name.split(".")[1:]
    if parts[:1] == ["store"]:  # (``pcache.store``: a folder of its own in a checkout)
        path = os.path.join(_store_home(), *parts[1:])
    else:
        path = os.path.join(_HOME, *parts)
    real = os.path.realpath(f)
    return (
        real in (path + ".py", os.path.join(path, "__init__.py"))
        and os.path.isfile(real)
        and os.path.realpath(code.co_filename) == real
    )


def _store_home() -> str:
    """The folder ``pcache.store`` is loaded from (its own beside ``pcache`` where the
    checkout maps it so: review 223's runs saw its code's reads taken for the
    program's, from a thread writing the store while a trace was recorded)."""
    import pcache.store

    return os.path.dirname(os.path.realpath(pcache.store.__file__))


def _programs(frame: Any) -> bool:
    return _kind(frame) == "program"


def _posing(cls: type) -> type:
    """A subclass of ``cls``'s metaclass under which a class looks like ``cls`` in all
    but identity: its attributes (``__mro__``, ``__name__``, ``__dict__``), equality,
    hash, repr, instance and subclass checks and calls are ``cls``'s. A module's
    watching class is of it, so that what code computes from ``type(m)`` while a
    trace is recorded is what it computes unwatched (review 214: ``type(m).__mro__``,
    ``type(m) == ModuleType``); ``type(m) is ModuleType`` differs (the code scan
    refuses the program's: `pcache._guards`)."""
    meta = type(cls)

    def __getattribute__(k: type, name: str) -> Any:
        return meta.__getattribute__(cls, name)

    def __setattr__(k: type, name: str, value: Any) -> None:
        setattr(cls, name, value)

    def __delattr__(k: type, name: str) -> None:
        delattr(cls, name)

    def __eq__(k: type, other: Any) -> bool:
        return other is k or other is cls

    def __ne__(k: type, other: Any) -> bool:
        return not (other is k or other is cls)

    def __hash__(k: type) -> int:
        return hash(cls)

    def __repr__(k: type) -> str:
        return repr(cls)

    def __dir__(k: type) -> Any:
        return dir(cls)

    def __instancecheck__(k: type, x: Any) -> bool:
        return isinstance(x, cls)

    def __subclasscheck__(k: type, c: type) -> bool:
        return issubclass(c, cls)

    def __call__(k: type, *args: Any, **kwargs: Any) -> Any:
        return cls(*args, **kwargs)

    ns = {f.__name__: f for f in (__getattribute__, __setattr__, __delattr__, __eq__, __ne__,
                                  __hash__, __repr__, __dir__, __instancecheck__,
                                  __subclasscheck__, __call__)}  # fmt: skip
    return type(meta)(meta.__name__, (meta,), ns)


def _watching(cls: type) -> type:
    sub = _WATCHING.get(cls)
    if sub is not None:
        return sub
    get, local, frame_of, absent, sinks = (
        cls.__getattribute__,
        _LOCAL,
        sys._getframe,
        ABSENT,
        _SINKS,
    )

    def __getattribute__(self: Any, name: str) -> Any:
        if name == "__class__":
            return cls  # (``m.__class__ is ModuleType`` as without the watch)
        if not sinks or getattr(local, "busy", False):
            return get(self, name)
        try:
            v = get(self, name)
        except AttributeError:
            f = frame_of(1)
            if _programs(f):  # (from any thread: review 215)
                for reads in sinks:
                    reads.append((self, name, absent, _direct(f)))
            raise
        f = frame_of(1)
        if _programs(f):
            for reads in sinks:
                reads.append((self, name, v, _direct(f)))
        return v

    # (nothing else of its own an instance lookup could find: ``__slots__``, a
    # ``__doc__`` of None, review 215)
    ns = {"__getattribute__": __getattribute__, "__module__": cls.__module__,
          "__doc__": cls.__doc__}  # fmt: skip
    sub = _WATCHING[cls] = _posing(cls)(cls.__name__, (cls,), ns)
    POSING[id(sub)] = (sub, cls)  # (what pcache's own type tests see it as)
    return sub


def _direct(frame: Any) -> bool:
    """Whether ``frame``'s code reads the attribute itself (``m.K``, ``from m import
    K``), by whatever route it holds the module, rather than C code it called (numpy's
    ``ndarray.sum`` importing ``numpy._core._methods`` by name and reading ``_sum``)."""
    try:
        return frame.f_code.co_code[frame.f_lasti] in _READS
    except IndexError:
        return True


def _c_by_name(mod: Any) -> bool:
    """Whether C code reads module ``mod`` by its name (`_C_READS_BY_NAME`)."""
    return type(mod) is str and any(
        mod == n or (n.endswith(".") and mod.startswith(n)) for n in _C_READS_BY_NAME
    )


def _library(m: Any) -> bool:
    e = _LIBRARY.get(id(m))
    if e is None or e[0] is not m:
        try:
            e = (m, is_library_module(m))
        except Exception:  # (a module pcache cannot read: not watched, the trace refused)
            e = (m, None)
        if len(_LIBRARY) > 16384:
            _LIBRARY.clear()
        _LIBRARY[id(m)] = e
    return e[1]


def _plan(mods: list) -> tuple[list, list]:
    """The modules among ``mods`` to watch, each (module, its class, the class that
    watches), and those that cannot be watched (as reads that refuse). Every module
    but JAX's and pcache's: which are a library's is asked only of those the program
    reads (`watched`; asking it of every loaded module costs ~75 ms a process)."""
    plan, problems, seen = [], [], set()
    mine = {id(sub) for sub in _WATCHING.values()}  # (by identity: they pose as theirs)
    for m in mods:
        if not is_a(m, types.ModuleType) or id(type(m)) in mine or id(m) in seen:
            continue  # (``os.path`` is ``posixpath``: one module, two names)
        seen.add(id(m))
        d = module_dict(m)
        name = d.get("__name__") if type(d) is dict else None
        if type(name) is str and name.partition(".")[0] in _UNWATCHED:
            continue
        plan.append((m, type(m), _watching(type(m))))
    return plan, problems


def _made(orig: Any) -> Any:
    def module_from_spec(spec: Any) -> Any:
        m = orig(spec)
        try:
            _MADE[id(m)] = m
            _NOTED[0] += 1
        except TypeError:  # (a loader's object that takes no weak reference)
            pass
        return m

    module_from_spec.__wrapped__ = orig
    return module_from_spec


def _track_made() -> None:
    """Note every module the import system's ``module_from_spec`` makes, so that one
    no ``sys.modules`` entry holds (a plugin a library executes without registering
    it, review 215) is watched too."""
    if _TRACKING:
        return
    _TRACKING.append(True)
    import importlib.util
    from importlib import _bootstrap

    wrapped = _made(_bootstrap.module_from_spec)
    _bootstrap.module_from_spec = wrapped
    if getattr(importlib.util, "module_from_spec", None) is wrapped.__wrapped__:
        importlib.util.module_from_spec = wrapped


def start() -> list:
    """Watch library modules' reads for this thread's recording; the list the reads
    go to (`watched`), until `stop`."""
    t0 = perf_counter()
    with _LOCK:
        if _ACTIVE[0] == 0:
            _track_made()
            _ACTIVE[1:] = [], [], None
        _swap_loaded()
        _ACTIVE[0] += 1
        reads = list(_ACTIVE[2])
        _SINKS.append(reads)
        _STARTS.append((reads, len(_ACTIVE[1])))
    _LOCAL.spent = perf_counter() - t0
    return reads


def note_loaded() -> None:
    """Note the modules loaded now (from pcache's start: `pcache._install`), so that
    those the program takes out of ``sys.modules`` later are watched too."""
    _track_made()
    for m in list(sys.modules.values()):
        if is_a(m, types.ModuleType):
            _SEEN[id(m)] = m


def note(d: dict) -> None:
    """Note the modules namespace ``d`` holds (a library module's, when its import
    finished: `pcache._snapshots`): a module a library's import bound, which
    ``sys.modules`` may never hold when pcache looks (a copy the program made by hand
    and registered only while the library imported it: review 222)."""
    kinds: dict = {}  # (id(a class) -> whether a module's: ~130 names a namespace, few classes)
    for v in list(d.values()):
        t = type(v)
        got = kinds.get(id(t))
        if got is None:
            got = kinds[id(t)] = subclass(t, types.ModuleType)
        if got and _SEEN.get(id(v)) is not v:
            _SEEN[id(v)] = v
            _NOTED[0] += 1


def _loaded() -> list:
    """Every module to watch: those ``sys.modules`` holds, then those it held when
    pcache looked before or that the import system made, while they live (those
    beyond ``sys.modules`` found again only when it or what pcache noted changed)."""
    now = list(sys.modules.values())
    if _NOTED[0] == _LOOKED[1] and _same(now, _LOOKED[0]):
        return [*now, *_LOOKED[2]]
    noted = _NOTED[0]
    for m in now:
        if is_a(m, types.ModuleType) and _SEEN.get(id(m)) is not m:
            _SEEN[id(m)] = m
    held = {id(m) for m in now}
    extra = [m for m in (*_MADE.values(), *_SEEN.values()) if id(m) not in held]
    _LOOKED[:] = [now, noted, extra]
    return [*now, *extra]


def others(name: str, m: Any) -> bool:
    """Whether a module other than ``m`` that pcache knows of (`_loaded`: held by
    ``sys.modules`` when it looked, or made by the import system, and alive) names
    itself ``name``: a copy made by hand, the first of a module imported again, which
    a library may hold and the program read through (review 222)."""
    for x in _loaded():
        if x is not m and is_a(x, types.ModuleType):
            d = module_dict(x)
            if type(d) is dict and d.get("__name__") == name:
                return True
    return False


def _same(mods: list, was: list | None) -> bool:
    """Whether ``mods`` are the very objects of ``was`` (never ``==``: a module class,
    or a ``sys.modules`` entry, may say it equals anything, review 220)."""
    return was is not None and len(mods) == len(was) and all(map(is_, mods, was))


def _swap_loaded() -> None:
    """Give every loaded module not watched yet its watching class: all of them for
    the first recording in progress; for one that starts while another is (in any
    thread), those loaded since (review 219: a module a thread imported while
    another's trace ran was not watched for a recording the first thread started
    then). Under `_LOCK`."""
    mods = _loaded()
    if _ACTIVE[0]:
        if _same(mods, _ACTIVE[3]):
            return  # (nothing loaded since the modules were swapped)
        plan, problems = _plan(mods)  # (of those not watched yet: `_plan` skips the rest)
    else:
        if not _same(mods, _PLAN[0]):
            _PLAN[:] = [mods, *_plan(mods)]
        plan, problems = _PLAN[1], _PLAN[2]
    _ACTIVE[3] = mods
    swapped, problems = _ACTIVE[1], _ACTIVE[2] + problems
    _ACTIVE[2] = problems
    for m, cls, sub in plan:
        if type(m) is not cls:  # (its class changed since: planned again next time)
            _PLAN[0] = None
            problems.append((m, "<unwatched>", ABSENT))
            continue
        try:
            m.__class__ = sub
        except TypeError:  # (a module class whose layout forbids it)
            problems.append((m, "<unwatched>", ABSENT))
            continue
        swapped.append((m, cls, sub))


def stop(reads: list) -> float:
    """The end of this thread's recording (`release`); a module whose class changed
    while watched (a lazy module that loaded) is noted in ``reads`` as not watched.
    The seconds watching cost beyond what it costs every trace (a plan of the
    modules, a code's first reading): what a trace's saving, `pcache._persist.
    record`'s cost policy, must not count."""
    spent, _LOCAL.spent = getattr(_LOCAL, "spent", 0.0), 0.0
    t0 = perf_counter()
    with _LOCK:
        # (a module watched only since another recording started, one loaded since and
        # not watched (by this trace or another thread: review 219): what this trace
        # read from it is not known)
        began = next((n for r, n in _STARTS if r is reads), 0)
        for i, (m, _, sub) in enumerate(_ACTIVE[1]):
            if type(m) is not sub or i >= began:
                reads.append((m, "<unwatched>", ABSENT))
        mods = _loaded()
        if not _same(mods, _ACTIVE[3]):
            reads += [(m, "<unwatched>", ABSENT) for m, _, _ in _plan(mods)[0]]
    release(reads)
    return spent + perf_counter() - t0


def release(reads: list) -> None:
    """The end of the recording whose reads go to ``reads`` (from any thread: one
    whose trace raised); the modules' classes are their own again once none is
    left."""
    with _LOCK:
        if not any(r is reads for r in _SINKS):
            return  # (ended already)
        _SINKS[:] = [r for r in _SINKS if r is not reads]
        _STARTS[:] = [e for e in _STARTS if e[0] is not reads]
        _ACTIVE[0] -= 1
        if _ACTIVE[0] == 0:
            for m, cls, sub in _ACTIVE[1]:
                if type(m) is sub:  # (unless something else set it since)
                    m.__class__ = cls
            _ACTIVE[1:] = [], [], None


def watched(reads: list, known: set) -> tuple[list, str | None, str | None]:
    """The reads of a recording as guard tuples ``(kind, namespace, name, object)``
    of `pcache._guards` (``kind``: "is" for a module, "attr" for another object,
    "absent"), each name once, but those ``known`` (``(id(namespace), name)``: the
    key's guards); or why the recording cannot be guarded so; and the first of them
    the program's code read itself, or C code it called read of a module but those
    C code reads by name (``module.name``; None: `_C_READS_BY_NAME`'s, as numpy's
    ``ndarray.sum``), which no name describes across processes: by
    whatever route the program holds a module, a later process's may hold another of
    that name (reviews 221-223: a copy made by hand, renamed, the first of a module
    imported again)."""
    out, seen, direct = [], {}, None
    for m, name, v, *how in reads:
        if name in ("<unreadable>", "<unwatched>"):
            return [], f"module-{name[1:-1]}:{getattr(m, '__name__', '?')}", None
        lib = _library(m)
        if lib is None:
            return [], "module-unreadable", None
        if name == "__spec__" and lib and v is module_dict(m).get("__spec__"):
            continue  # (the import system's test of a loaded library module, made from C
            # for the program's frame: ``ndarray.sum`` importing ``numpy._core._methods``)
        # (a program's module too: its names are keyed where the program's code reads
        # them by name, `known`, not where a library hands it over: review 222, a copy
        # of a library module made by hand, which no RECORD lists)
        d = module_dict(m)
        if type(d) is not dict or name == "__dict__":
            why = f"module-namespace-read:{d.get('__name__') if type(d) is dict else '?'}"
            return [], why, None
        before = seen.get((id(d), name), seen)
        if before is not seen and before is not v:
            return [], f"module-read-changed:{name}", None  # (two reads, two objects)
        seen[id(d), name] = v
        if (id(d), name) in known:
            continue
        if direct is None and how and (how[0] or not _c_by_name(d.get("__name__"))):
            direct = f"{d.get('__name__')}.{name}"
        if before is not seen:
            continue  # (once)
        if name not in d:
            if v is not ABSENT and _from_type(name):
                continue  # (``m.__class__``, ``m.__repr__``: the module type's own)
            # (absent, or what its ``__getattr__`` answered: as `_guards._library_getattr`)
            out.append(("absent", d, name, None))
            if (id(d), "__getattr__") not in known:
                getter = d.get("__getattr__", ABSENT)
                got = ("absent", d, "__getattr__", None) if getter is ABSENT else None
                out.append(got or ("attr", d, "__getattr__", getter))
        elif d[name] is not v:  # (rebound while traced)
            return [], f"module-read-changed:{name}", None
        else:
            out.append(("is" if is_a(v, types.ModuleType) else "attr", d, name, v))
    return out, None, direct


def _from_type(name: str) -> bool:
    """Whether ``m.name`` of a name no module holds gives what the module type
    defines (``__class__``, ``__repr__``) rather than anything of the module's."""
    return name.startswith("__") and hasattr(types.ModuleType, name)


__all__ = ["ABSENT", "note", "note_loaded", "others", "release", "start", "stop", "watched"]
