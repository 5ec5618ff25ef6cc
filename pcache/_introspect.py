"""Objects and classes read as the interpreter runs them, not as they describe themselves.

A class can answer ``isinstance`` (a ``__class__`` property, a weakref proxy that
forwards it), ``vars()`` and ``obj.__dict__`` (a ``__dict__`` property, a
``__getattribute__``), and a metaclass can answer ``__mro__``, ``__flags__``,
``__dict__``, ``__name__`` and ``__module__`` with whatever it likes. The trace
walker decides what a value is and what it holds from these, so it reads them
through the interpreter's own descriptors (``type``'s, and the one that really
holds an instance's attributes), which no user class can shadow, and it never
runs user code while reading them.

JAX-free.
"""

from __future__ import annotations

import collections
import ctypes
import dataclasses
import functools
import gc
import struct
import sys
import types
from typing import Any

__all__ = [
    "dataclass_frozen",
    "POSING",
    "Override",
    "cell_bound",
    "by_id",
    "cdict",
    "class_attr",
    "class_ids",
    "fields",
    "flags",
    "inst_dict",
    "is_a",
    "items",
    "mro",
    "names",
    "plain_module",
    "subclass",
    "type_ids",
    "typed",
    "unwatched",
]

cdict = type.__dict__["__dict__"].__get__  # a class's own namespace (a mappingproxy)
mro = type.__dict__["__mro__"].__get__
flags = type.__dict__["__flags__"].__get__
_name = type.__dict__["__name__"].__get__
_qualname = type.__dict__["__qualname__"].__get__
_module = type.__dict__["__module__"].__get__
_DICT_DESCRIPTORS = (types.GetSetDescriptorType, types.MemberDescriptorType)
_MISSING = object()


def items(d: Any) -> list[tuple[Any, Any]]:
    """The items of a dict or a class's namespace, as one snapshot. ``dict.copy``
    copies in C without allocating per item, so no other thread runs mid-way; a
    tuple allocated per item, as ``list(d.items())`` does, can start the garbage
    collector, its finalizers and a thread switch, and another thread's import then
    grows ``sys.modules`` or a module's namespace mid-iteration ("dictionary changed
    size during iteration", a preload thread initializing LAPACK kernels). A dict
    subclass's storage, as the interpreter reads it (no override runs); an
    ``OrderedDict``'s in its own order (not its storage's), by its own C method (a
    subclass's ``items()`` answers what the interpreter does not read: review 194); a
    mapping proxy's by the mapping it wraps (not its ``copy()``); any other
    mapping: its ``items()``."""
    t = type(d)
    if t is types.MappingProxyType:
        inner = gc.get_referents(d)  # (the mapping it wraps: its one referent)
        if len(inner) == 1 and type(inner[0]) is dict:
            return list(dict.copy(inner[0]).items())
        if len(inner) == 1 and subclass(type(inner[0]), dict):
            return items(inner[0])
        return list(d.copy().items())
    if subclass(t, collections.OrderedDict):
        return list(collections.OrderedDict.items(d))
    if subclass(t, dict):
        return list(dict.copy(d).items())
    return list(d.items())


class Override(Exception):
    """A class defines ``__dict__`` as something other than the interpreter's own
    descriptor: what its instances hold cannot be read without running its code."""


def subclass(t: type, classes: type | tuple[type, ...]) -> bool:
    """Whether ``t``'s real MRO holds one of ``classes`` (by identity: no
    ``__subclasscheck__``, no ABC registry, no metaclass ``__eq__``)."""
    ids = map(id, mro(t))  # (ints compared: no class's ``__eq__`` runs; in C)
    if type(classes) is tuple:
        return not set(map(id, classes)).isdisjoint(ids)
    return id(classes) in ids


def mro_ids(t: type) -> set[int]:
    """The ids of ``t``'s real MRO: one walk for many `has` tests of one type."""
    return {id(k) for k in mro(t)}


def has(ids: set[int], classes: type | tuple[type, ...]) -> bool:
    """`subclass` over `mro_ids`."""
    if type(classes) is tuple:
        return any(id(c) in ids for c in classes)
    return id(classes) in ids


#: id(a watching class) -> (it, the module class it poses as): `pcache._module_watch`
POSING: dict[int, tuple[type, type]] = {}


def unwatched(t: type) -> type:
    """``t``, or the module class it stands in for where it is one of `pcache.
    _module_watch`'s watching classes: pcache's own tests of a module's type see
    through the watch (review 219: a key made while another thread's trace was
    recorded refused every plain module as a module subclass)."""
    e = POSING.get(id(t))
    return t if e is None or e[0] is not t else e[1]


def plain_module(v: Any) -> bool:
    """Whether ``v``'s real class is `types.ModuleType` (a watched module's too)."""
    t = type(v)
    return t is types.ModuleType or (bool(POSING) and unwatched(t) is types.ModuleType)


def is_a(v: Any, classes: type | tuple[type, ...]) -> bool:
    """``isinstance`` by ``v``'s real type (``type(v)``, not ``v.__class__``)."""
    return subclass(type(v), classes)


def dict_reader(t: type) -> Any:
    """What `inst_dict` reads an instance of ``t``'s dict through (a descriptor), or
    None (none), or `Override`: for many instances of one type."""
    for k in mro(t):
        d = cdict(k).get("__dict__", _MISSING)
        if d is _MISSING:
            continue
        if type(d) in _DICT_DESCRIPTORS and d.__objclass__ is k:
            return d
        return Override
    return None


def inst_dict(v: Any, exact: bool = True) -> dict[str, Any] | None:
    """``v``'s own attribute dict, read through the descriptor that holds it (None
    when its type gives it none, or, ``exact``, when it is not a plain dict: a dict
    subclass assigned to ``__dict__``); `Override` when a class of its type defines
    ``__dict__`` itself (a property, a copied descriptor of another class)."""
    for k in mro(type(v)):
        d = cdict(k).get("__dict__", _MISSING)
        if d is _MISSING:
            continue
        if type(d) in _DICT_DESCRIPTORS and d.__objclass__ is k:
            got = d.__get__(v, type(v))
            return got if type(got) is dict or not exact else None
        raise Override(k)
    return None


def fields(v: Any) -> list | None:
    """Every value ``v`` keeps, as the interpreter keeps them: its ``__dict__``'s and
    its named slots' (an ``lru_cache``'s: the function it calls, however its
    ``__wrapped__`` was changed: review 94). None when that is not all it keeps (a
    C type's fields no Python code reads, a subclass of a builtin container) or its
    class defines ``__dict__`` itself."""
    t = type(v)
    if t is _LRU_CACHE:  # (what it calls, among what the interpreter sees it hold; its
        # cache holds that function's arguments and results: JAX's ``util.cache``)
        called = [r for r in gc.get_referents(v) if callable(r) and not is_a(r, type)]
        return called + list((inst_dict(v) or {}).values())
    named = [n for k in mro(t) for n in _slots(k) if n not in ("__dict__", "__weakref__")]
    size = _OBJECT_SIZE + _WORD * (len(named) + (t.__weakrefoffset__ > 0) + (t.__dictoffset__ > 0))
    if t.__basicsize__ != size or t.__itemsize__:
        return None
    try:
        held = list((inst_dict(v) or {}).values())
    except Override:
        return None
    return held + [getattr(v, n, None) for n in named]


def _slots(k: type) -> tuple:
    s = cdict(k).get("__slots__", ())
    return (s,) if type(s) is str else tuple(s) if type(s) in (tuple, list) else ()


_OBJECT_SIZE, _WORD = object.__basicsize__, struct.calcsize("P")
_LRU_CACHE = type(functools.lru_cache(lambda: None))


def class_attr(t: type, name: str) -> Any:
    """What an instance of ``t`` finds as ``name`` in its class (the real MRO's
    namespaces; None if none has it)."""
    return next((d[name] for k in mro(t) if name in (d := cdict(k))), None)


def by_id(table: dict[type, Any]) -> dict[int, Any]:
    """A table of types keyed by identity: a lookup by the type itself would run a
    user metaclass's ``__hash__`` and ``__eq__`` (one that says it equals ``float``).
    Only for types that live as long as the table (builtins', libraries')."""
    return {id(t): v for t, v in table.items()}


def type_ids(types_: Any) -> frozenset[int]:
    """`by_id` for a set of types."""
    return frozenset(map(id, types_))


def class_ids() -> frozenset[int]:
    """The ids of every class alive now: each is a subclass of ``object`` at some
    depth, read with ``type``'s own method (a metaclass may override it). A class
    that dies later may leave its id to one made after."""
    seen, todo = {id(object)}, [object]
    while todo:
        for k in type.__subclasses__(todo.pop()):
            if id(k) not in seen:
                seen.add(id(k))
                todo.append(k)
    return frozenset(seen)


def names(t: type) -> tuple[str, str, Any]:
    """A class's real ``__name__``, ``__qualname__`` and ``__module__``."""
    return _name(t), _qualname(t), _module(t)


_D = struct.Struct("<d")
_EXACT = frozenset({type(None), bool, int, str, bytes})


def typed(v: Any, strict: bool = False) -> Any:
    """A settings value for a key compared with ``==``: each scalar with its exact
    type (``True``, ``1`` and ``1.0`` differ), a float by its bits (``-0.0``, NaNs),
    tuples item by item. Any other object: with its type, compared by its own
    ``==`` (JAX's enums and values); with ``strict``, a `TypeError` (the caller
    refuses it)."""
    t = type(v)
    if t is float:
        return ("f", _D.pack(v))
    if t is tuple:
        return ("t", *[typed(x, strict) for x in v])
    if t in _EXACT:
        return (t.__name__, v)
    if strict:
        raise TypeError(t.__qualname__)
    return (t, v)


def cell_bound(cell: Any) -> bool:
    """Whether a closure cell holds a value (an unassigned one raises on reading)."""
    try:
        cell.cell_contents  # noqa: B018
    except ValueError:
        return False
    return True


def _interned_reader() -> Any:
    """How to read whether a string is interned: the two low bits of the ``state``
    field after a string's length and hash (CPython 3.11 to 3.13), once shown here to
    be 0 for a string made at run time and not for the same string interned; None
    anywhere else."""
    if sys.implementation.name != "cpython" or not (3, 11) <= sys.version_info[:2] <= (3, 13):
        return None
    offset = 2 * ctypes.sizeof(ctypes.c_void_p) + 2 * ctypes.sizeof(ctypes.c_ssize_t)

    def read(s: str) -> bool:
        return bool(ctypes.c_uint8.from_address(id(s) + offset).value & 3)

    made = "".join(["pcache interned probe ", str(id(object())), "-x"])
    other = "".join(["pcache interned probe ", "-y"])
    if read(made) or read(other) or sys.intern(made) is not made or not read(made):
        return None
    return read


_INTERNED = _interned_reader()


def interned(s: str) -> bool | None:
    """Whether exact string ``s`` is the interpreter's interned copy of its value
    (the one ``sys.intern`` and every identifier-like literal give); None where this
    cannot be read."""
    return None if _INTERNED is None else _INTERNED(s)


def native(k: type) -> bool:
    """Whether heap class ``k``'s instances hold more than a class statement gives
    them over its base (its slots, a dict, a weak reference list): an extension's C
    state (nanobind's and pybind11's classes are heap types too: a jaxlib ``Device``),
    which nothing here reads (review 196). Exact for every class a ``.py`` file of the
    standard library, numpy, JAX, NumPyro or diffrax defines, on 3.10-3.13."""
    base = _BASE(k)
    if base is None:
        return False
    want = _PTR * sum(
        1
        for v in cdict(k).values()
        if type(v) is types.MemberDescriptorType and v.__objclass__ is k
    )
    flags = _FLAGS(k)
    if _WEAKREF_AT(k) and not _WEAKREF_AT(base) and not flags & _MANAGED_WEAKREF:
        want += _PTR
    if _DICT_AT(k) and not _DICT_AT(base) and not flags & _MANAGED_DICT:
        want += _PTR
    return _SIZE(k) - _SIZE(base) != want


_BASE = type.__dict__["__base__"].__get__
_SIZE = type.__dict__["__basicsize__"].__get__
_DICT_AT = type.__dict__["__dictoffset__"].__get__
_WEAKREF_AT = type.__dict__["__weakrefoffset__"].__get__
_PTR = struct.calcsize("P")
_MANAGED_DICT = 1 << 4 if sys.version_info >= (3, 11) else 0
_MANAGED_WEAKREF = 1 << 3 if sys.version_info >= (3, 12) else 0
_FLAGS = type.__dict__["__flags__"].__get__


def own_method(v: Any, bound: Any) -> bool:
    """Whether the builtin method ``v`` is what its name finds on its object's type
    (what the key says: the name and the type), not a base class's bound by hand.
    A type's ``__new__`` is its own (``tuple.__new__``, a namedtuple's ``_tuple_new``)
    when its namespace holds that very object."""
    t = type(bound)
    if v.__name__ == "__new__" and is_a(bound, type):
        return cdict(bound).get("__new__") is v
    for k in mro(t):
        d = cdict(k).get(v.__name__)
        if d is not None:
            get = getattr(type(d), "__get__", None)
            try:
                return get is not None and get(d, bound, t) == v
            except Exception:
                return False
    return False


_DC_PARAMS = dataclasses._DataclassParams
_DC_FROZEN = _DC_PARAMS.__dict__["frozen"].__get__  # (its slot: nothing of the program's runs)


def dataclass_frozen(params: Any) -> bool:
    """Whether a class's ``__dataclass_params__`` says frozen: read only from the
    record ``dataclasses`` makes (review 231: a property ``frozen`` on another object
    ran program code inside the walk, a whole jit call)."""
    return type(params) is _DC_PARAMS and _DC_FROZEN(params) is True
