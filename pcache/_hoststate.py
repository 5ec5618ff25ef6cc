"""The host state a trace reads outside JAX and the callable (`host_state`): part of
every trace-reuse key (`pcache._trace`) and of the persisted one (`pcache._persist_key`).
JAX-free."""

from __future__ import annotations

import abc
import array
import codecs
import collections
import copyreg
import decimal
import functools
import gc
import importlib.machinery
import locale
import operator
import os
import re
import sys
import types
import warnings
import zipimport
from typing import Any

import numpy as np

from pcache._dictwatch import Derived
from pcache._introspect import (
    Override,
    cell_bound,
    fields,
    inst_dict,
    is_a,
    items,
    plain_module,
    typed,
)
from pcache._memos import memo
from pcache._snapshots import FINDER
from pcache._usercode import (
    NoReuse,
    is_library_code,
    is_library_module,
    is_library_type,
    plain_partial,
)


def host_state(klass: Any = None, abc_token: bool = True) -> tuple:
    """Process state outside JAX that tracing reads and that changes what a trace
    does: numpy's floating-point error mode (``np.seterr``: raise or not) and print
    options, the decimal context (and ``DefaultContext``), and the warning filters (a warning turned into an
    error). Every value by its exact type (`typed`: ``linewidth=75.0`` is not ``75``:
    review 36); a print option or a filter part of any other type, or a filter whose
    category is a user class (the interpreter runs its metaclass on every warning:
    review 35), means no reuse; and ABCMeta's registration counter (any ABC's
    ``register``). ``klass``: how a filter's category is written (the
    class itself; `pcache._persist_key.named` across processes). ``abc_token``
    False: without the counter, a count that depends on import order (the
    persisted key names the registrations instead)."""
    err = np.geterr()
    call = np.geterrcall()  # what np.seterr(..., "call"/"log") calls or writes to
    if call is not None:
        # code run while tracing, over state no key sees (a user object's ``write``,
        # ``L.index`` of a list that changes: review 32), now or once the trace itself
        # enters ``np.errstate(all="call")`` (review 65)
        raise NoReuse("numpy-error-callback")
    opts = np.get_printoptions()
    if opts.get("formatter") is not None or opts.get("override_repr") is not None:
        raise NoReuse("numpy-print-hooks")  # functions ``repr`` runs while tracing
    if not _copyreg_plain():
        raise NoReuse("copyreg-user-reducer")  # ``copy.copy`` runs it (review 67)
    if not _codecs_plain():
        raise NoReuse("codec-user-hook")  # ``str.encode`` runs it (review 106)
    if _user_hook(sys.breakpointhook) or not _library_finders() or not _path_finders():
        raise NoReuse("interpreter-hook")  # user code run on ``breakpoint()``, an import
    if _user_hook(sys.gettrace()) or _user_hook(sys.getprofile()):
        # the program's own trace or profile function runs at every line it traces
        # and may skip or rewrite them (review 66); a library's (coverage's, pdb's) not
        raise NoReuse("trace-hook")
    try:
        return (
            typed((sys.getrecursionlimit(), _int_digits()), strict=True),
            # every ABC registration made so far (``collections.abc.Set.register(range)``
            # changes what ``isinstance`` answers: review 41): ABCMeta's counter
            typed(abc.get_cache_token() if abc_token else None, strict=True),
            # in process, which modules are loaded, by identity: an import between two
            # calls adds a submodule to its package (``hasattr(m, "tool")``, however
            # user code came by ``m``: a parameter, a loop, a cell; review 59)
            modules_stamp() if abc_token else None,
            # the decimal context, and the one ``decimal.Context()`` copies (review 53)
            _decimal(decimal.getcontext()),
            _decimal(decimal.DefaultContext),
            # the C library's locale (``format(n, "n")``, ``locale.localeconv()``,
            # ``str.upper`` of bytes under ``re.LOCALE``: review 55), every category
            locale.setlocale(locale.LC_ALL),
            _typed_items("err", err),
            _filters(klass),
            # (the action for a warning no filter matches: review 85)
            typed(warnings.defaultaction, strict=True),
            # numpy's print options (``repr`` of a numpy scalar read while tracing:
            # review 28)
            _typed_items("print", opts),
            # numpy's ufunc buffer size (how a casting reduction sums: review 52), the
            # working directory (``os.path.abspath``), and the CPU's rounding mode and
            # flush-to-zero, as arithmetic shows them (a library built with fast math)
            typed((np.getbufsize(), os.getcwd()), strict=True),
            _fp_mode(),
        )
    except TypeError:
        raise NoReuse("host-state-value") from None


def _modules_stamp() -> tuple:
    held = tuple(map(id, sys.modules.values()))  # (a copy: another thread may import)
    return (len(held), hash(held))  # (by identity: an entry may hash as it likes, review 220)


#: Which modules are loaded, by identity (a module replaced by another counts):
#: computed again only when ``sys.modules`` was written
modules_stamp = memo("hoststate.modules", Derived(lambda: (sys.modules,), _modules_stamp))


def _decimal(c: Any) -> str:
    if type(c) is not decimal.Context:  # a subclass's methods run while tracing (review 65)
        raise NoReuse("decimal-context-subclass")
    # (the exact type's own repr: precision, rounding, exponent limits, capitals,
    # clamp, and the names of the flags and traps set, all ints and fixed names)
    return repr(c)


def _fp_mode() -> tuple:
    one, e1, e2, three = _PROBE  # (read at run time: constants fold when compiled)
    tiny = np.float32(1e-45)  # (the least float32 subnormal; 0 under DAZ/FTZ)
    return (
        one + e1 + e2 > one,  # rounds up?
        -one - e1 - e2 < -one,  # rounds down?
        (one / three).hex(),
        (tiny * np.float32(one)).tobytes(),
        (np.float64(5e-324) * one).tobytes(),
    )


_PROBE = [1.0, 2.0**-53, 2.0**-78, 3.0]


# klass -> (the filters list's items, their encoding): each filter is an immutable
# tuple of immutable parts (checked by `_filter`), so the same items by identity
# have the same encoding (the hit path reads this on every call; one per klass: the
# in-process key's and the persisted key's alternate on a persisted lookup)
_FILTERS: dict = memo("hoststate.filters", {})


def _filters(klass: Any) -> tuple:
    items = tuple(warnings.filters)
    got = _FILTERS.get(klass)
    if got is not None and len(items) == len(got[0]) and all(map(operator.is_, items, got[0])):
        return got[1]
    enc = tuple(_filter(f, klass) for f in items)
    if len(_FILTERS) > 4:
        _FILTERS.clear()
    _FILTERS[klass] = (items, enc)
    return enc


def _filter(f: Any, klass: Any) -> tuple:
    if type(f) is not tuple or len(f) != 5:
        raise NoReuse("warning-filter")
    action, msg, cat, mod, lineno = f
    if not (is_a(cat, type) and is_library_type(cat) and is_library_type(type(cat))):
        raise NoReuse("warning-filter-class")
    return (
        typed(action, strict=True),
        _pattern(msg),
        cat if klass is None else klass(cat),
        _pattern(mod),
        typed(lineno, strict=True),
    )


def _pattern(p: Any) -> Any:
    if p is None or type(p) is str:
        return typed(p)
    if type(p) is re.Pattern and type(p.pattern) is str:
        return ("re", p.pattern, p.flags)
    raise NoReuse("warning-filter-pattern")


_int_digits = getattr(sys, "get_int_max_str_digits", lambda: None)
_EXACT_EQ = (int, str, bool, type(None), bytes)  # (== is exact: no -0.0, no NaN)
_ITEMS: dict = memo("hoststate.typed_items", {})  # what -> (items, types, encoding, exact)


def _typed_items(what: str, d: dict) -> Any:
    """``typed(tuple(d.items()), strict=True)``, the last encoding again while ``d``
    holds equal values of the same types, each one whose ``==`` is exact (the hit
    path reads numpy's options on every call)."""
    raw = tuple(d.items())
    kinds = tuple(map(type, d.values()))
    last = _ITEMS.get(what)
    if (
        last is not None
        and last[3]
        and len(kinds) == len(last[1])
        and all(map(operator.is_, kinds, last[1]))
        and raw == last[0]
    ):
        return last[2]
    enc = typed(raw, strict=True)
    exact = all(any(k is e for e in _EXACT_EQ) for k in kinds)
    _ITEMS[what] = (raw, kinds, enc, exact)
    return enc


def _user_hook(hook: Any, depth: int = 0, held: bool = False) -> bool:
    """Whether calling ``hook`` (a ``sys.settrace``/``sys.setprofile`` function, a
    ``copyreg`` reducer, an import finder) may run user code or read a program's
    data: anything but an installed library's function (and what its closure and
    defaults hold), a builtin of a module, a bound method of such over such an
    object, a class, or an instance of a library class whose attributes are such.
    A partial (or a library object) over a program's function is the program's
    (review 89), and so is one of a program's subclass of ``functools.partial``;
    ``held``: reached through a function's closure or defaults, a partial's
    arguments or a method's object, where a mutable container is data the program
    may change (``partial(operator.getitem, D)``: review 95). Anything unknown, or
    nested too deep, is taken as the program's."""
    if depth > 6:
        return True
    if hook is None or type(hook) in _DATA:
        return False
    t = type(hook)
    if held and is_a(hook, _MUTABLE):
        return True
    if t is types.FunctionType:
        if not is_library_code(hook.__globals__, hook.__code__):
            return True
        inner, held = _function_held(hook), True
    elif t is types.MethodType:
        inner, held = [hook.__func__, hook.__self__], True
    elif t is types.BuiltinFunctionType or t is types.MethodWrapperType:
        return not plain_module(hook.__self__)  # (``DATA.get``: data read)
    elif plain_partial(hook):  # (its fields as partial.__call__ reads them)
        func, args, kw = (f(hook) for f in _PARTIAL_FIELDS)
        inner, held = [func, *args, *kw.values()], True
    elif t is tuple or t is frozenset:
        inner = list(hook)
    elif t is list or t is dict:  # (a library object's: its state, not the program's)
        inner = list(hook.values() if t is dict else hook)
    elif is_a(hook, type):
        return not is_library_type(hook)
    elif is_library_type(t) and t not in _WRAPPERS:
        if _known_opaque(t):
            return False
        # (a container it holds may be the program's: ``ChainMap(D).get``, review 96;
        # a debugger's bound method holding its breakpoints is taken as the program's)
        inner, held = fields(hook), True
        if inner is None:
            return True  # (state no Python code reads: an ``lru_cache`` of any function)
    else:
        return True
    return any(_user_hook(x, depth + 1, held) for x in inner)


_MUTABLE = (list, dict, set, bytearray, collections.deque, np.ndarray, array.array)


def _function_held(f: types.FunctionType) -> list:
    """What a function holds: its bound closure cells' values and its defaults."""
    inner = [c.cell_contents for c in f.__closure__ or () if cell_bound(c)]
    return inner + [*(f.__defaults__ or ()), *(f.__kwdefaults__ or {}).values()]


_DATA = frozenset({bool, int, float, complex, str, bytes, type(...)})
#: library classes that call whatever they were given (by name or held): judged by
#: what they hold only where that is read above, else the program's
_WRAPPERS = frozenset(
    {operator.methodcaller, operator.attrgetter, operator.itemgetter, types.SimpleNamespace}
)
#: library classes whose instances keep state outside their ``__dict__`` and are
#: taken as the library's, each for a reason: coverage's C tracer (``sys.gettrace()``
#: under coverage or pytest-cov) holds coverage's own configuration and callbacks;
#: the standard library's profiler (``sys.getprofile()`` under ``cProfile``) records
#: timings (a ``timer`` function of the program's it may call is not seen: README)
_OPAQUE = (("coverage.tracer", "CTracer"), ("cProfile", "Profile"), ("_lsprof", "Profiler"))


def _known_opaque(t: type) -> bool:
    return any(
        is_library_module(m) and getattr(m, name, None) is t
        for mod, name in _OPAQUE
        if (m := sys.modules.get(mod)) is not None
    )


_PARTIAL_FIELDS = tuple(functools.partial.__dict__[n].__get__ for n in ("func", "args", "keywords"))


def _copyreg_verdict() -> bool:
    # (a library's reducer registered for any type: its code)
    return not any(_user_hook(red) for _, red in items(copyreg.dispatch_table))


#: Whether ``copyreg``'s dispatch table holds only library reducers: ``copy.copy``,
#: ``copy.deepcopy`` (and ``dataclasses.asdict`` through it) run a registered
#: reducer, which no key walks (review 67). Answered again when the table is written.
_copyreg_plain = memo(
    "hoststate.copyreg", Derived(lambda: (copyreg.dispatch_table,), _copyreg_verdict)
)


_CODECS: dict = memo("hoststate.codecs", {})
_PROBE_NAME = "pcache.probe"


def _probe_handler(e: Any) -> Any:  # (registered for good: no API removes a handler)
    raise e


def _codec_registries() -> tuple:
    """The interpreter's codec search functions (a list) and error handlers (a dict):
    neither can be listed from Python, so each is found, once, as the one container
    that refers to a probe registered in it (None: not found)."""
    got = _CODECS.get("registries")
    if got is not None:
        return got

    def probe(_name: str) -> None:
        return None

    codecs.register(probe)
    codecs.register_error(_PROBE_NAME, _probe_handler)
    try:  # (one scan of every object the collector tracks, for both)
        found = gc.get_referrers(probe, _probe_handler)
        lists = [r for r in found if type(r) is list and any(x is probe for x in r)]
        dicts = [r for r in found if type(r) is dict and r.get(_PROBE_NAME) is _probe_handler]
    finally:
        codecs.unregister(probe)
    got = _CODECS["registries"] = (
        lists[0] if len(lists) == 1 else None,
        dicts[0] if len(dicts) == 1 else None,
    )
    return got


def _codecs_plain() -> bool:
    """Whether every codec search function and error handler the interpreter holds is
    a library's (`_user_hook`): ``str.encode``/``bytes.decode`` run them while
    tracing, and no key sees a program's (``codecs.register_error("h", mine)`` made
    at import, by a configuration the next process reads otherwise: review 106); the
    last answer again for the same functions (kept alive). Registries not found:
    no (fail closed)."""
    search, errors = _codec_registries()
    if search is None or errors is None:
        return False
    handlers = tuple(dict.copy(errors).items())  # (copies made in C)
    now = (*list(search), *handlers)
    last = _CODECS.get("last")
    if last is not None and len(now) == len(last[0]) and all(map(operator.is_, now, last[0])):
        return last[1]
    ok = not any(map(_user_hook, search)) and all(_handler(n, h) for n, h in handlers)
    _CODECS["last"] = (now, ok)
    return ok


def _handler(name: Any, h: Any) -> bool:
    """A library's error handler, or the interpreter's own under its standard name
    (made in C with no module: ``strict`` is ``strict_errors``)."""
    if type(h) is types.BuiltinFunctionType and h.__self__ is None:
        return _STANDARD_HANDLERS.get(name) == h.__name__
    return not _user_hook(h)


_STANDARD_HANDLERS = {
    **{n: f"{n}_errors" for n in ("strict", "ignore", "replace", "xmlcharrefreplace",
                                  "backslashreplace", "namereplace")},
    "surrogatepass": "surrogatepass", "surrogateescape": "surrogateescape",
}  # fmt: skip


def _library_finders() -> bool:
    """Whether every entry of ``sys.meta_path`` is a library's (`_library_finder`),
    the last answer again for the same finders of the same classes (kept alive)."""
    now = tuple(sys.meta_path)
    kinds = tuple(map(type, now))
    last = _META.get("last")
    if (
        last is not None
        and last[3]
        and len(now) == len(last[0])
        and all(map(operator.is_, now + kinds, last[0] + last[1]))
    ):
        return last[2]
    ok = all(map(_library_finder, now))
    # (memoized only while no finder holds attributes of its own: their state may
    # change without the list changing)
    _META["last"] = (now, kinds, ok, not any(map(_holds_state, now)))
    return ok


def _path_finders() -> bool:
    """Whether the path finder's hooks (``sys.path_hooks``) and the finders it made
    per directory (``sys.path_importer_cache``) are the interpreter's or a library's:
    a program's finder there serves its own copy of a module a library imports while
    tracing (review 107); the last answer again for the same objects (a finder's
    loaders changed in place are not seen)."""
    now = (*tuple(sys.path_hooks), *tuple(sys.path_importer_cache.values()))
    last = _META.get("paths")
    if last is not None and len(now) == len(last[0]) and all(map(operator.is_, now, last[0])):
        return last[1]
    ok = all(map(_path_hook, sys.path_hooks)) and all(
        map(_path_finder, tuple(sys.path_importer_cache.values()))
    )
    _META["paths"] = (now, ok)
    return ok


_MACHINERY = importlib.machinery
_LOADERS = (_MACHINERY.SourceFileLoader, _MACHINERY.SourcelessFileLoader,
            _MACHINERY.ExtensionFileLoader)  # fmt: skip
_HOOK_CODES = tuple(
    c for c in _MACHINERY.FileFinder.path_hook.__code__.co_consts if type(c) is types.CodeType
)
_FILE_FINDER_STATE = frozenset({"_loaders", "path", "_path_mtime", "_path_cache", "_relaxed_path_cache"})  # fmt: skip


def _loader(x: Any) -> bool:
    return any(x is c for c in _LOADERS)


def _path_hook(h: Any) -> bool:
    if h is zipimport.zipimporter:
        return True
    if type(h) is types.FunctionType and any(h.__code__ is c for c in _HOOK_CODES):
        # (``FileFinder.path_hook(*loader_details)``'s closure: the interpreter's loaders)
        try:
            cells = dict(zip(h.__code__.co_freevars, (c.cell_contents for c in h.__closure__ or ()), strict=True))  # fmt: skip
        except ValueError:  # (an empty cell; a closure of another length)
            return False
        details = cells.get("loader_details")
        return (
            cells.get("cls") is _MACHINERY.FileFinder
            and type(details) is tuple
            and all(
                type(d) is tuple and len(d) == 2 and _loader(d[0]) and type(d[1]) is list
                and all(type(x) is str for x in d[1])
                for d in details
            )
        )  # fmt: skip
    return not _user_hook(h)


def _path_finder(f: Any) -> bool:
    if f is None:
        return True  # (a directory nothing imports from)
    t = type(f)
    if t is _MACHINERY.FileFinder:
        try:
            d = inst_dict(f) or {}
        except Override:
            return False
        return set(d) <= _FILE_FINDER_STATE and all(
            type(p) is tuple and len(p) == 2 and type(p[0]) is str and _loader(p[1])
            for p in d.get("_loaders", ())
        )
    if t is zipimport.zipimporter:
        return True  # (an archive's path and listing)
    return _library_finder(f)


def _holds_state(finder: Any) -> bool:
    try:
        return not is_a(finder, type) and bool(inst_dict(finder))
    except Override:
        return True


_META: dict = memo("hoststate.meta_path", {})  # "last" -> (finders, classes, verdict, stateless)


def _library_finder(finder: Any) -> bool:
    """Whether an entry of ``sys.meta_path`` is an installed library's (a class, as the
    interpreter's own finders are, or an instance of one holding none of the
    program's functions): a program's own finder decides what a library's import
    loads while tracing (review 70). (Not the deep `_user_hook`: pytest's own finder
    holds its whole configuration.)"""
    if any(finder is f for f in _FINDERS) or finder is FINDER:
        return True
    if is_a(finder, type):
        return is_library_type(finder)
    t = type(finder)
    if not is_library_type(t) or t in _WRAPPERS:  # (``SimpleNamespace(find_spec=fn)``)
        return False
    try:  # (a library finder holding a program's function: review 89)
        return not any(map(_program_function, (inst_dict(finder) or {}).values()))
    except Override:
        return False


def _program_function(v: Any, depth: int = 0) -> bool:
    """Whether ``v`` is a function of the program's, or a method, partial or callable
    object over one (a callable object of the program's class, a library's keeping
    what it calls where no Python code reads it, a library function over one:
    ``functools.singledispatch(f)``, a method of a program's object)."""
    t = type(v)
    if depth > 4:
        return True
    if t is types.FunctionType:
        if not is_library_code(v.__globals__, v.__code__):
            return True
        inner = _function_held(v)
        # (and what containers there hold: ``singledispatch``'s registry)
        inner += [y for x in inner if type(x) in (dict, list, tuple)
                  for y in (x.values() if type(x) is dict else x)]  # fmt: skip
        return any(_program_function(x, depth + 1) for x in inner if callable(x))
    if t is types.MethodType:
        me = v.__self__
        return _program_function(v.__func__, depth + 1) or not (
            is_a(me, type) or is_library_type(type(me))
        )
    if plain_partial(v):
        func, args, kw = (f(v) for f in _PARTIAL_FIELDS)
        return any(_program_function(x, depth + 1) for x in (func, *args, *kw.values()))
    if is_a(v, type):
        return not is_library_type(v)
    if not callable(v) or t in _PLAIN_CALLABLES or _known_opaque(t):
        return False
    if not is_library_type(t):
        return True
    held = fields(v)  # (an ``lru_cache`` of a program's function: review 94)
    return held is None or any(_program_function(x, depth + 1) for x in held if callable(x))


_PLAIN_CALLABLES = frozenset(
    {types.BuiltinFunctionType, types.MethodWrapperType, types.WrapperDescriptorType,
     types.MethodDescriptorType, types.MethodType}
)  # fmt: skip


_FINDERS = (
    importlib.machinery.BuiltinImporter,
    importlib.machinery.FrozenImporter,
    importlib.machinery.PathFinder,
)
