"""The tables of reflection: what reads state by names held in data, or state of the
interpreter, and so is never part of a reused trace (`pcache._usercode`'s code scan,
`pcache._walk`, `pcache._guards` and `pcache._reach` consult them).

The standard library is an allowlist (`PLAIN_STDLIB`): a module of it off the list
is reflective by default. Everything else is a denylist of attribute names, builtins,
modules and functions, each entry with the review or reason that put it there.

JAX-free.
"""

from __future__ import annotations

import string
import sys
from typing import Any

from pcache._memos import memo

# Attributes through which code reads state no key or guard sees: another
# function's globals or closure, a frame, the module table, a module by name.
REFLECTIVE = frozenset(
    {
        "__globals__",
        "__dict__",
        "__closure__",
        "__code__",
        "__defaults__",
        "__kwdefaults__",
        "__builtins__",
        "cell_contents",
        "f_globals",
        "f_locals",
        "f_back",
        "f_builtins",
        "_getframe",
        "currentframe",
        "import_module",
        "modules",
        "getmodule",
        "__import__",
        "__subclasses__",
        "__annotations__",
        "__wrapped__",
        "resolve_name",
        "locate",
        "get_referrers",
        "get_referents",
        "get_objects",
    }
)
# Builtins (also as ``builtins.<name>``) through which code reads or runs what no
# guard can see.
# (``dir``: the names an object or module has now, which a later import adds to:
# review 55)
UNGUARDABLE = frozenset(
    {"globals", "vars", "locals", "dir", "eval", "exec", "__import__", "compile"}
)
# Builtins whose result is an object's identity (``SCALE_BY_ID[id(c)]``, ``hash`` of a
# function): compared with ints held elsewhere, which no key relates to the object.
IDENTITY_BUILTINS = frozenset({"id", "hash"})
# Builtins that read what no guard can see when reached as a value (``G = globals``,
# ``GA = getattr`` with a name held in data, ``id``/``hash`` of an object compared
# with ints held elsewhere): a callable that holds one is not reused.
REFLECTIVE_BUILTINS = (
    UNGUARDABLE
    | IDENTITY_BUILTINS
    | frozenset({"getattr", "setattr", "delattr", "hasattr", "breakpoint", "open", "input"})
)
# Library modules whose functions read what no guard can see (frames, the module
# table, any object by name or by reference): code that reaches them, or holds one
# of their functions, is not reused.
REFLECTION_MODULES = frozenset(
    {
        "inspect",
        "pkgutil",
        "pydoc",
        "importlib",
        "gc",
        "ctypes",
        "_ctypes",
        "builtins",
        "sys",
        "pickle",
        "_pickle",
        "copyreg",
        "marshal",
        "typing",
        "typing_extensions",  # get_type_hints evaluates names (review 25)
        "shelve",
        "dill",
        "cloudpickle",
        "traceback",
        "linecache",
        "faulthandler",
        "pdb",
        "bdb",
        "trace",
        "tracemalloc",
        "runpy",
        "code",
        "codeop",
        "zipimport",
        "unittest",  # unittest.mock's importer resolves dotted names
    }
)
#: Modules within otherwise plain packages that resolve names to objects (a dotted
#: name imported and walked attribute by attribute: ``logging.config``'s ``resolve``).
REFLECTION_SUBMODULES = frozenset(
    {
        "logging.config",
        "multiprocessing.reduction",
        "numpy.ctypeslib",  # ctypes: the interpreter's own state
        "numpy.f2py",
        "numpy.testing",
        "numpy.matrixlib",  # np.bmat("A,B") reads the caller's frame by name
        "numpy.lib._utils_impl",  # np.who, np.source, np.info: frames, source
        "numpy.lib.utils",
        "numpy.distutils",
    }
)


#: The standard library's modules whose code a reused callable may reach: pure
#: computation over the values it is given (numbers, containers, text, dates, a
#: deterministic or documented source: ``random``, ``time``, ``os.environ``). Any
#: other module of the standard library may read interpreter or process state no key
#: sees (``contextvars.copy_context``, ``signal.getsignal``, ``doctest``'s module by
#: name, ``rlcompleter.__main__``: reviews 26 and 27; ``logging`` walks frames and
#: formats records, ``warnings`` matches filters by the caller's module: review 28):
#: an allowlist, not a denylist.
PLAIN_STDLIB = frozenset(
    {
        "math", "cmath", "operator", "_operator", "functools", "_functools", "itertools",
        "collections", "_collections", "_collections_abc", "abc", "_abc", "numbers", "enum",
        "dataclasses", "types", "copy", "re", "_sre", "struct", "_struct", "array",
        "decimal", "_decimal", "_pydecimal", "fractions", "statistics", "random", "_random",
        "heapq", "_heapq", "bisect", "_bisect",
        # (not calendar, reprlib: module state public functions set, ``setfirstweekday``,
        # ``aRepr.maxstring``: review 39; not time, datetime, _strptime: ``time.tzset()``
        # rebinds ``time.timezone`` and the C library's zone: review 52)
        # (not weakref, threading: ``getweakrefcount(o)``, ``active_count()``,
        # ``stack_size()`` read interpreter state: review 53)
        "contextlib", "_weakrefset",
        "string", "_string", "textwrap", "keyword",
        "json", "_json", "base64", "binascii", "hashlib", "_hashlib", "zlib", "unicodedata",
        "io", "_io", "os", "posixpath", "ntpath", "genericpath", "stat", "_stat", "errno",
        "queue", "_queue", "codecs", "_codecs", "encodings", "uuid",
        "pprint", "_sha256", "_sha512", "_md5", "_blake2", "select", "selectors",
    }
)  # fmt: skip
_STDLIB = frozenset(getattr(sys, "stdlib_module_names", ()))


def reflective_module(name: str) -> bool:
    """Whether library code of module ``name`` may read state by names held in data
    (or interpreter state): a module of the standard library off `PLAIN_STDLIB`, one
    of `REFLECTION_MODULES`, or within `REFLECTION_SUBMODULES`."""
    verdict = _REFLECTS.get(name)
    if verdict is None:
        if len(_REFLECTS) > 8192:
            _REFLECTS.clear()
        top = name.partition(".")[0]
        verdict = _REFLECTS[name] = (
            top in REFLECTION_MODULES
            or (top in _STDLIB and top not in PLAIN_STDLIB)
            or any(name == m or name.startswith(m + ".") for m in REFLECTION_SUBMODULES)
        )
    return verdict


#: Functions of otherwise plain modules that read attributes by names they are given
#: (``update_wrapper(w, f, updated=(name,))`` is ``getattr(f, name)``: review 26).
REFLECTIVE_FUNCTIONS = frozenset(
    {
        ("functools", "update_wrapper"),
        ("functools", "wraps"),
        # classes made while tracing, from the caller's frame or module namespace by
        # name, with methods exec'd in it (review 28)
        ("functools", "singledispatch"),  # register() evaluates string annotations
        ("functools", "singledispatchmethod"),
        ("collections", "namedtuple"),
        ("dataclasses", "dataclass"),
        ("dataclasses", "make_dataclass"),
        ("enum", "global_enum"),
        ("enum", "global_enum_repr"),
        ("enum", "global_flag_repr"),
        ("enum", "global_str"),
        ("types", "new_class"),
    }
)


def reflective_callable(v: Any) -> str | None:
    """Why calling ``v`` (a builtin or library function reached as a value) reads
    what no guard can see; None if it does not."""
    name = getattr(v, "__name__", None)
    module = getattr(v, "__module__", None)
    if not isinstance(module, str):
        return None
    if (module, name) in REFLECTIVE_FUNCTIONS:
        return f"reflective-function:{module}.{name}"
    root = module.partition(".")[0]
    if root == "builtins":
        return f"reflective-builtin:{name}" if name in REFLECTIVE_BUILTINS else None
    if reflective_module(module):
        return f"reflective-function:{module}.{name}"
    if root in ("operator", "_operator") and name in ("is_", "is_not"):
        return "identity-test"
    if (root, name) in _WRITES_ARGUMENT or (name in _MUTATORS and root == "builtins"):
        # what it writes into (a library's ``np.sctypeDict``: review 59) no key sees
        return f"writes-argument:{module}.{name}"
    if (module, name) in _SETS_STATE:  # process or module state no key reads (review 63)
        return f"sets-state:{module}.{name}"
    return None


# Methods that write the object they are called on (a list, dict, set, deque, numpy
# array, ...): never called through what no key walks again, nor held as a value
# unbound (``UPD = dict.update``: review 61).
_MUTATORS = frozenset(
    {
        "append", "extend", "insert", "pop", "popitem", "clear", "update", "add",
        "remove", "discard", "setdefault", "sort", "reverse", "__setitem__",
        "__delitem__", "__iadd__", "__ior__", "__iand__", "__ixor__", "__isub__",
        "__imul__", "__init__", "difference_update", "intersection_update",
        "symmetric_difference_update", "appendleft", "extendleft", "popleft", "rotate",
        "move_to_end", "fill", "put", "put_nowait", "resize", "itemset", "setflags",
        "byteswap", "__setstate__", "__set__",
        # (review 65: numpy's and the other in-place operators, array.array's loaders,
        # Counter.subtract, ndarray.partition/setfield)
        "__itruediv__", "__ifloordiv__", "__imod__", "__ipow__", "__ilshift__",
        "__irshift__", "__imatmul__", "__iconcat__", "partition", "setfield", "subtract",
        "frombytes", "fromlist", "fromunicode", "fromfile",
    }
)  # fmt: skip


# Functions that set what later code reads: a seed, numpy's error callback and modes.
_SETS_STATE = frozenset(
    {("random", "seed"), ("random", "setstate"), ("numpy", "seterr"), ("numpy", "seterrcall")}
    | {(m, n) for m in ("codecs", "_codecs") for n in ("register", "register_error")}
    | {("numpy", "setbufsize"), ("numpy", "set_printoptions"), ("numpy.random", "seed")}
    | {("numpy.random.mtrand", "seed"), ("numpy.random.mtrand", "set_state")}
)


# Plain standard-library functions that write into an argument (of ``operator``, the
# in-place ones too: ``iadd(lst, more)``).
_OPERATOR_WRITES = (
    "setitem delitem iadd iand iconcat ifloordiv ilshift imatmul imod imul ior ipow irshift"
    " isub itruediv ixor"
).split()
_WRITES_ARGUMENT = frozenset(
    {(m, n) for m in ("operator", "_operator") for n in _OPERATOR_WRITES}
    | {
        (m, n)
        for m in ("heapq", "_heapq")
        for n in ("heappush", "heappop", "heapify", "heapreplace", "heappushpop")
    }
    | {(m, n) for m in ("bisect", "_bisect") for n in ("insort", "insort_left", "insort_right")}
    | {(m, n) for m in ("random", "_random") for n in ("shuffle",)}
    | {("copy", "deepcopy")}  # (its ``memo``: review 65)
    | {(m, "pack_into") for m in ("struct", "_struct")}  # (its buffer: review 69)
    # numpy's that write their first argument (review 65); any ``out=`` is refused by
    # the scan (`pcache._usercode`)
    | {
        (m, n)
        for m in ("numpy", "numpy.core.multiarray", "numpy._core.multiarray")
        for n in ("copyto", "put", "place", "putmask", "put_along_axis", "fill_diagonal")
    }
)


# Parts of a string that name reflective state (in a format string, an attrgetter).
_REFLECTIVE_PARTS = (
    "__globals__",
    "__dict__",
    "__code__",
    "__closure__",
    "__builtins__",
    "__subclasses__",
    "__annotations__",
    "f_globals",
    "f_locals",
    "f_back",
    "cell_contents",
    "gi_frame",
    "cr_frame",
    "ag_frame",
    "tb_frame",
    "__getattribute__",
    "__setattr__",
    "__delattr__",
    "__traceback__",
)


_ATTR_BUILTINS = frozenset({"getattr", "hasattr", "setattr", "delattr"})
_ATTR_WRITES = frozenset({"setattr", "delattr"})
_SETTERS = frozenset({"setattr", "delattr", "__setattr__", "__delattr__"})
_CONSTRUCTORS = frozenset({"__init__", "__post_init__", "__new__", "__setattr__", "__delattr__"})
FORMATS = frozenset({"format", "format_map", "vformat", "get_field", "get_value"})
# Names a format string can reach frames and globals through without a dunder.
FORMAT_REFLECTIVE = (
    "f_globals", "f_locals", "f_back", "f_builtins", "gi_frame", "cr_frame", "ag_frame",
    "tb_frame", "tb_next", "cell_contents", "modules",
)  # fmt: skip
# Attributes that read or write any attribute by a name held in data, or reach frames
# and tracebacks (``obj.__getattribute__(name)``, ``e.__traceback__.tb_frame``).
REFLECTIVE_ATTRS = frozenset(
    {
        "__getattribute__",
        "__getattr__",
        "is_",  # operator.is_/is_not: an identity test (see `_singleton_test`)
        "is_not",
        "__setattr__",
        "__delattr__",
        "__reduce__",
        "__reduce_ex__",
        "__getstate__",
        "__traceback__",
        "tb_frame",
        "tb_next",
        "gi_frame",
        "cr_frame",
        "ag_frame",
        "f_code",
        "attrgetter",
        "methodcaller",
        "Formatter",
        "vformat",
        "_convert_",  # enum: a member per global of a module named by a string
        "__module__",  # (a class made while tracing names the caller's module: review 28)
        # decimal's other contexts: only the current one and DefaultContext are keyed,
        # and an operation given one (``context=``) writes its flags (review 65)
        "ExtendedContext",
        "BasicContext",
        "__context__",  # the exception being handled when the jit was called
        "__cause__",
        "exc_info",
        "exception",
        # what the allocator or the object's identity says, not its content
        # (``L.__sizeof__()`` of equal lists, ``f.__hash__()``: review 53)
        "__sizeof__",
        "__hash__",
        "__weakref__",
        "__dir__",  # (as ``dir``)
        # builtins reached as attributes (``import builtins as b; b.eval``)
        *(UNGUARDABLE - {"compile"}),  # (``re.compile``: a code object alone reads nothing)
        *_ATTR_BUILTINS,
    }
)


def library_function_reflects(module: str, name: str) -> bool:
    """Whether the library function ``module.name`` (by its globals' module) reads
    state by names held in data: its module is reflective, it formats (``str.format``
    over a format string built at trace time), or it is one of `REFLECTIVE_FUNCTIONS`.
    (Pure functions of the names, memoized: the walk asks them of every library
    function and module it meets.)"""
    key = (module, name)
    verdict = _REFLECTS.get(key)
    if verdict is None:
        if len(_REFLECTS) > 8192:
            _REFLECTS.clear()
        verdict = _REFLECTS[key] = (
            reflective_module(module) or name in FORMATS or key in REFLECTIVE_FUNCTIONS
        )
    return verdict


_REFLECTS: dict = memo("reflection.verdicts", {})  # module name, or (module, name) -> verdict


def format_reaches(text: str) -> bool:
    """Whether format string ``text`` reads an attribute or item of an argument
    (``"{0.K}"``, ``"{m[k]}"``, also in a nested spec): C code reading it for the
    program's frame, as the module watch counts no read of the program's own (review
    224: ``"{0.K}".format(m)`` of a module a library handed over)."""
    fields = []
    try:  # (up to where it stops parsing: ``format`` reads the fields before that)
        fields += string.Formatter().parse(text)
    except (ValueError, TypeError):
        pass
    for _, name, spec, _ in fields:
        if name is not None and ("." in name or "[" in name):
            return True
        if spec and "{" in spec and format_reaches(spec):
            return True
    return False


__all__ = [
    "FORMATS",
    "format_reaches",
    "FORMAT_REFLECTIVE",
    "IDENTITY_BUILTINS",
    "PLAIN_STDLIB",
    "REFLECTION_MODULES",
    "REFLECTION_SUBMODULES",
    "REFLECTIVE",
    "REFLECTIVE_ATTRS",
    "REFLECTIVE_BUILTINS",
    "REFLECTIVE_FUNCTIONS",
    "UNGUARDABLE",
    "library_function_reflects",
    "reflective_callable",
    "reflective_module",
]
