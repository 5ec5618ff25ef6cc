"""A library class by what it is, beside its module and qualified name.

The persisted key names a library's class by module and qualified name
(`pcache._persist_key.named`): the installed version fixes what that name's import
binds. But two processes may hold two classes under that one name: a library
function rebinds it (``use_second()``: ``Mode = _SECOND``) before pcache could copy
the namespace, by means no reading of the library's code enumerates (an alias of
``globals()`` or ``locals()``, a helper returning one, ``partial(operator.setitem,
...)``, a sourceless module: reviews 170-176). So the name comes with the class's
shape, read from the class itself in each process: the names its own module holds
it under (``Mode`` and ``_FIRST`` against ``Mode`` and ``_SECOND``), its bases and
metaclass by name, and each attribute of its own namespace by what it is (a
function by its code's content and first line, a constant by its value, a class by
its name, any other object by its type). Two classes of one name then share a key
only if their module holds both under the same names and their own attributes are
alike to that depth: one the library re-creates from the same source at the same
line, or that differ only in an object's state (a class attribute holding a mutable
instance: state libraries hold, documented). Any other library object named by a
module attribute comes with the names its module holds it under and what it is
(`looks`: ``CURRENT`` holding ``FAST`` against ``SLOW``).

JAX-free.
"""

from __future__ import annotations

import abc
import collections
import enum
import functools
import gc
import hashlib
import operator
import re
import struct
import sys
import threading
import types
import weakref
from typing import Any

import numpy as np

from pcache._class_homes import fixed, holds, lru_parts
from pcache._dictwatch import read_tags, tag_cells
from pcache._introspect import (
    Override,
    cdict,
    cell_bound,
    inst_dict,
    is_a,
    items,
    mro,
    names,
    native,
    own_method,
    plain_module,
)
from pcache._memos import memo
from pcache._persist_code import code_digest, unordered
from pcache._persist_pack import packed
from pcache._snapshots import unchanged
from pcache._usercode import NoReuse, is_library_module, module_dict

_FUNCTION = types.FunctionType
#: id -> (class, its module's namespace, sizes, its own reading, the classes it names)
_SHAPES: dict = memo("persist.class_shape", {})
#: What this thread reads: .refs (the classes the reading in progress names, None
#: outside one), .index (their ids -> place), .busy (functions being read), .held,
#: .left (`_spend`)
_LOCAL = threading.local()
_SCALARS = frozenset({type(None), bool, int, str, bytes})


def shape(cls: type, namespace: dict) -> str:
    """``cls`` by its shape (module docstring); ``namespace``: its module's.

    The classes a shape reads form a graph (a class holding an instance of another,
    whose function's default holds the first: cycles, review 191), described whole:
    each class reached from ``cls``, in the order first reached, by its name and
    its own reading (`_local`), in which each class it names is its place in that
    order. Two classes share a shape only if the graphs they reach are alike, which
    of their classes are one class included; reading one is linear in the classes
    it reaches, each read once per process (review 189's cycles were read again
    along every path: seconds for a registry of equinox modules, session 36), and a
    graph of more than `_BUDGET` classes is refused."""
    if fixed(cls, namespace):  # (by its name alone)
        return "fixed"
    order = {id(cls): 0}
    todo = [(cls, namespace)]
    out = []
    for c, ns in todo:  # (grows as it goes: breadth first)
        own, refs = _local(c, ns)
        at = []
        for d, dns in refs:
            j = order.get(id(d))
            if j is None:
                if len(todo) >= _BUDGET:
                    raise NoReuse("persist-library-value-too-large")
                j = order[id(d)] = len(todo)
                todo.append((d, dns))
            at.append(j)
        out.append((_name(c), own, tuple(at)))
    return packed(b"pcache-class-graph\n", out)


def _local(cls: type, namespace: dict) -> tuple:
    """(what ``cls`` is, digested, each class it names by its place in the tuple
    that comes with it: ``(class, namespace)`` in the order named), kept per class
    while neither its namespace nor its module's was written (`_token`: a name or
    attribute rebound; what an object it holds holds is state)."""
    e = _SHAPES.get(id(cls))
    if e is not None and e[0] is cls and e[1] is namespace and _token(e[2], cls, namespace) == e[3]:
        return e[4], e[5]
    cells = tag_cells(_spaces(cls, namespace))
    token = _token(cells, cls, namespace)  # (before it is read: a write meanwhile, next time)
    here = _LOCAL.__dict__
    saved = {k: here.get(k) for k in ("refs", "index", "busy", "held", "left")}
    refs: list = []
    here.update(refs=refs, index={}, busy={}, held=0, left=_BUDGET)
    try:
        own = packed(b"pcache-class\n", _shape(cls, namespace))  # (digested once)
    except RecursionError:
        raise NoReuse("persist-library-value-too-deep") from None
    finally:
        for k, v in saved.items():
            if v is None:
                here.pop(k, None)
            else:
                here[k] = v
    if len(_SHAPES) > 8192:
        _SHAPES.clear()
    _SHAPES[id(cls)] = (cls, namespace, cells, token, own, tuple(refs))  # (kept alive)
    return own, tuple(refs)


def _spaces(cls: type, namespace: Any) -> tuple:
    """The dict a class's reading is kept while unwritten: its own (under the mapping
    proxy); its module's namespace by its size (pcache's own patches write JAX's at
    every served call; a name rebound there is `pcache._snapshots.unchanged`'s)."""
    held = gc.get_referents(cdict(cls))
    return (held[0],) if len(held) == 1 and type(held[0]) is dict else ()


def _token(cells: tuple, cls: type, namespace: Any) -> tuple:
    """What tells a class's reading still holds: its dict's version tag (review 232:
    a method rebound in place, ``Mode.scale = other``, kept the sizes the reading was
    kept by) and its and its module's sizes."""
    return (read_tags(cells), len(cdict(cls)), len(namespace))


def _spend(busy: dict) -> None:
    """One more function read in this class's reading (or outermost read: ``busy``
    empty outside a class's); past `_BUDGET` the key is refused: functions whose
    closures and defaults hold each other have paths past counting, each a read."""
    here = _LOCAL.__dict__
    fresh = not busy and here.get("refs") is None
    left = _BUDGET if fresh else here.get("left", 0) - 1
    if left < 0:
        raise NoReuse("persist-library-value-too-large")
    here["left"] = left


_BUDGET = 4096


def stamp(cls: type, module: str, qual: str) -> str | None:
    """What an output tree stores beside a class it names by ``module`` and ``qual``
    (a NamedTuple, a registered node: `pcache._compat.traces`), compared where it is
    read back: a library class's shape, only while the name holds what its import
    bound (else None: not stored, not read back; review 179: a library's
    ``P = namedtuple(...)`` rebound, the served tree built B's other class); "" for a
    program's class (its module is keyed by content)."""
    m = sys.modules.get(module)
    if m is None or not is_library_module(m):
        return ""
    d = module_dict(m)
    if type(d) is not dict or not unchanged(module, qual):
        return None
    return shape(cls, d)


def _shape(cls: type, namespace: dict) -> tuple:
    """What ``cls`` itself is: the names its module holds it under, its own
    attributes, its bases, metaclass and method resolution order."""
    holders = sorted(_key(k) for k, v in items(namespace) if v is cls)
    # (in its namespace's order, which code iterating ``vars(cls)`` sees: review 195)
    own = [(_key(k), _attr(_doc(k, v), 1)) for k, v in items(cdict(cls))]
    # (its bases and metaclass by their own shapes: what it inherits, review 178)
    kin = [_class(b) for b in (*_BASES_OF(cls), type(cls))]  # (a metaclass's ``__bases__``
    # or ``__mro__`` property does not answer for them)
    # (and its method resolution order, which a metaclass's ``mro()`` may decide other
    # than its bases say: review 189)
    order = [_class(b) for b in mro(cls)[1:]]
    # (and its own ``__name__``, which its qualified name does not say: review 193)
    return (holders, own, kin, order, _TYPE_NAME(cls))


def _class(t: type) -> tuple:
    """A class by its name and shape: in the namespace of the module it names, or
    none where that is not loaded (a public path: review 182); a builtin by name.
    Inside a class's reading, a class is its place among those it names (`shape`
    reads them)."""
    _, qual, mod = names(t)
    if not _FLAGS(t) & _HEAPTYPE:  # (a C type: what it is cannot change)
        return (*_name(t), "")
    m = sys.modules.get(mod) if type(mod) is str and mod != "builtins" else None
    d = module_dict(m) if m is not None else None
    ns = d if type(d) is dict else _NOT_LOADED
    here = _LOCAL.__dict__
    refs = here.get("refs")
    if refs is None:
        return (*_name(t), shape(t, ns))
    if fixed(t, ns):
        return (*_name(t), "fixed")
    index = here["index"]
    j = index.get(id(t))
    if j is None:
        j = index[id(t)] = len(refs)
        refs.append((t, ns))
    return (*_name(t), ("at", j))


_NOT_LOADED = types.MappingProxyType({})  # (a module not loaded: one namespace, so shapes memoize)
_BASES_OF = type.__dict__["__bases__"].__get__
_TYPE_NAME = type.__dict__["__name__"].__get__
_HEAPTYPE = 1 << 9  # (Py_TPFLAGS_HEAPTYPE: a class made by a class statement, ``type()``)
_FLAGS = type.__dict__["__flags__"].__get__
_IMMUTABLE = 1 << 8  # (Py_TPFLAGS_IMMUTABLETYPE: an extension's type, ``partial``)


#: JAX's own types a description reads, by identity (not by a class's name and module,
#: which a library's class may say: review 196), told by the compatibility layer
#: (`_compat.traces`, which imports this module): type -> (kind, reader), ``array``,
#: ``treedef``, and ``jit`` with the reader of a jit object's function and options.
JAX_TYPES: dict = {}


def _doc(k: Any, v: Any) -> Any:
    """A docstring without the addresses a dataclass's holds (its defaults' reprs,
    ``<function f at 0x...>``); it is read (review 180: ``len(C.__doc__)``)."""
    return _ADDRESS.sub(" at 0x", v) if k == "__doc__" and type(v) is str else v


_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def _key(k: Any) -> str:
    """A namespace's or dict's key: a string as itself (one starting with ``?`` marked
    again), any other by what it is (review 199: ``{1: v}`` against ``{2: v}``)."""
    if type(k) is str:
        return "?" + k if k[:1] == "?" else k
    return "?" + repr(_attr(k, 1))


def _name(t: type) -> tuple:
    _, qual, mod = names(t)
    return (mod if type(mod) is str else "?", qual if type(qual) is str else "?")


def looks(v: Any) -> tuple:
    """What a library object named by a module attribute is, as a class attribute
    is described (`_attr`)."""
    try:
        return _attr(v, 0)
    except RecursionError:  # (tuples nested past the interpreter's stack)
        raise NoReuse("persist-library-value-too-deep") from None


def _attr(v: Any, depth: int) -> tuple:
    """``v`` by what it is, to a bounded depth: a scalar (numpy's too) by its value;
    a function by its code's content and first line, its closure, defaults and
    globals' module; a builtin by its name and what it is bound to; a partial, a
    static or class method, a property by what they hold; a class by its name and
    shape (`_class`; one whose shape is being read, by its name); a tuple by its items; an instance
    by its type and what its own dict or slots hold; any other object by its type
    (two that differ only in what they hold beyond that: state, documented)."""
    t = type(v)
    if t in _SCALARS:
        return (t.__name__, v)
    if t is float or t is complex:
        return (_name(t), np.asarray(v).tobytes())  # (by its bits: every NaN, -0.0)
    if id(t) in _NP_SCALARS:  # (with its dtype's units and fields: review 184)
        return (_name(t), v.dtype.str, repr(v.dtype.descr), np.asarray(v).tobytes())
    if depth > 12:  # (not described past it: refused, review 190)
        raise NoReuse("persist-library-value-too-deep")
    if t is _FUNCTION:  # (a function met again below itself: by that)
        busy = _LOCAL.__dict__.setdefault("busy", {})
        if id(v) in busy:  # (which one: how far up the path, review 191)
            return ("again", len(busy) - busy[id(v)])
        _spend(busy)
        busy[id(v)] = len(busy)
        try:
            return _function(v, depth)
        finally:
            del busy[id(v)]
    if t is np.ufunc and getattr(np, v.__name__, None) is not v:  # (``frompyfunc``'s:
        raise NoReuse("persist-library-value:ufunc")  # its function is not read)
    if t is types.BuiltinFunctionType or t is np.ufunc:
        owner = getattr(v, "__self__", None)
        bound = () if owner is None or is_a(owner, types.ModuleType) else _attr(owner, depth + 1)
        if bound and not own_method(v, owner):  # (``int.__or__.__get__(True)``: another
            raise NoReuse("persist-library-value:builtin-method-impl")  # type's: 200)
        return ("builtin", str(getattr(v, "__module__", "")), v.__name__, bound)
    if t is staticmethod or t is classmethod:  # (and what it copied from its function)
        return (t.__name__, *(_attr(x, depth + 1) for x in _BASES[t](v)))
    if t is property:  # (its functions and its own docstring: review 189)
        return ("prop", *(_attr(x, depth + 1) for x in _BASES[t](v)))
    if is_a(v, functools.partial):  # (a subclass's own state too: ``tree_util.Partial``;
        # its C fields by partial's own descriptors, not a subclass's ``func``: 192)
        func, args, keywords = (_PARTIAL[k](v) for k in ("func", "args", "keywords"))
        kw = sorted((_key(k), _attr(x, depth + 1)) for k, x in items(keywords))
        own = _held(v, depth)  # (and what its own dict holds, a plain partial's too)
        return ("partial", _class(t), _attr(func, depth + 1), _attr(args, depth + 1),
                tuple(kw), own)  # fmt: skip
    if is_a(v, type):  # (an inner class by its shape too: ``Outer.Mode = ...``)
        return ("cls", *_class(v))
    if plain_module(v):  # (a loaded module by its name: its version is keyed)
        name = (module_dict(v) or {}).get("__name__")
        if type(name) is not str or sys.modules.get(name) is not v:
            raise NoReuse("persist-library-value:module")
        return ("module", name)
    return _value(v, t, depth)


def _value(v: Any, t: type, depth: int) -> tuple:
    """`_attr` of containers, arrays and other values."""
    if t is tuple or t is frozenset:  # (whole, at the depth it is in: no cycle runs
        got = [_attr(x, depth) for x in v]  # through tuples alone: review 182)
        return (t.__name__, *(got if t is tuple else unordered(list(v), got)))
    if t is range or t is slice:
        return (t.__name__, *(_attr(x, depth + 1) for x in _ends(v)))
    if t is list or t is dict or t is collections.OrderedDict:  # (what it holds now:
        # a setting's value, ``{"scale": 1.0}`` against ``2.0``; in its order)
        got = (
            [(_attr(k, depth + 1), _attr(x, depth + 1)) for k, x in items(v)]
            if t is not list
            else [_attr(x, depth + 1) for x in list.copy(v)]
        )
        return (t.__name__, *got)
    if _stdlib_value(t):  # (immutable values of the standard library's: by their repr;
        if t.__name__ == "Pattern":  # a pattern's is cut at 200 characters)
            return ("pattern", v.pattern, v.flags)
        zone = getattr(v, "tzinfo", None)  # (a time zone's repr is its class's to say)
        if zone is not None and type(zone) is not type(_UTC):
            raise NoReuse("persist-library-value:tzinfo")
        # (and what a repr prints without its type: a Fraction's numerator may be a
        # numpy integer, a UUID's ``int`` too; a UUID's ``is_safe``: review 193)
        parts = _REPR_PARTS.get(t.__name__, ())
        return ("repr", t.__name__, t.__repr__(v),
                *(_attr(getattr(v, k), depth + 1) for k in parts))  # fmt: skip
    if t is np.dtype or id(t) in _DTYPES:  # (and what its metadata holds)
        meta = _attr(v.metadata, depth + 1) if v.metadata is not None else ()
        return ("dtype", v.str, repr(v), repr(v.descr) if v.names else "", meta)
    if is_a(v, enum.Enum):  # (a member by its class, name and value)
        return (
            "enum",
            _class(t),
            _attr(v._name_, depth + 1),
            _attr(v._value_, depth + 1),
            _held(v, depth),
            _base(v, t, depth),
        )  # (and what its ``__init__`` set, an
        # ``IntEnum``'s int, which its ``__new__`` may make other than its value: 193)
    if t in JAX_TYPES:
        return _jax_value(v, t, depth)
    if t is types.MethodType:  # (what it is bound to: review 180)
        return ("method", _attr(v.__func__, depth + 1), _attr(v.__self__, depth + 1))
    if t in _GETTERS:  # (C objects: what their reducer says they hold, all of it: a
        return ("getter", t.__name__, _attr(tuple(t.__reduce__(v)), depth + 1))  # keyword)
    if is_a(v, np.ndarray):  # (a subclass's own state too: a masked array's mask; what
        # it holds by ndarray's own descriptors, not a subclass's ``dtype``: review 192)
        extra = _held(v, 0) if t is not np.ndarray else ()
        a = v if t is np.ndarray else np.ndarray.view(v, np.ndarray)
        dt = _ND["dtype"](v)
        return ("nd", _class(t), _attr(dt, depth + 1), _ND["shape"](v), _digest(a, depth),
                _layout(v, depth), extra)  # fmt: skip
    if t is types.GenericAlias:  # (``list[int]``; ``*tuple[int]``: review 189)
        return ("alias", *(_attr(x, depth + 1) for x in _BASES[t](v)))
    if t is types.MethodWrapperType:  # (``(1.0).__mul__``; what its name finds on its
        if not own_method(v, v.__self__):  # object's type, not another's: review 200)
            raise NoReuse("persist-library-value:builtin-method-impl")
        return ("wrapper", v.__name__, _attr(v.__self__, depth + 1))
    if t is memoryview:  # (and the object it views: ``mv.obj``, review 201)
        return ("mv", v.format, v.shape, v.strides, v.readonly,
                hashlib.sha256(v.tobytes()).hexdigest(), _attr(v.obj, depth + 1))  # fmt: skip
    if t is struct.Struct:
        return ("struct", v.format)
    if t is set:
        return ("set", *_members(list(set.copy(v)), depth))
    if t in _DESCRIPTORS:  # (by its class, a heap class by its shape: two one name
        # holds, review 199; and its name)
        return ("desc", t.__name__, _class(v.__objclass__), v.__name__)
    if t in _OPAQUE:
        return _opaque(v, t, depth)
    if any(
        k is not object and k not in _BASES and (not _FLAGS(k) & _HEAPTYPE or native(k))
        for k in mro(t)
    ):  # (a C object no rule here reads, or a class's instance deriving from one, a
        # ``Decimal`` or ``property`` subclass: refused, what it holds is unseen: 188;
        # an extension's heap class too: a jaxlib ``Device``, review 196)
        raise NoReuse(f"persist-library-value:{_name(t)[1]}")
    # (its class by its shape: two classes one name holds, review 189)
    return ("obj", _class(t), _base(v, t, depth), _held(v, depth))


def _jax_value(v: Any, t: type, depth: int) -> tuple:
    """JAX's own tree structure (by JAX's serialization; one over custom nodes is not
    described), array (by content, as a program's global is: review 182; where), jit
    object (its function, its options as trace reuse keys them, its own dict), or
    compiled function of JAX's extension."""
    kind, read = JAX_TYPES[t]
    if kind == "treedef":
        try:
            return ("treedef", v.serialize_using_proto().hex())
        except ValueError:
            raise NoReuse("persist-library-treedef") from None
    if kind == "native":  # (a compiled function or method, by the path that holds it)
        mod, qual = getattr(v, "__module__", None), getattr(v, "__qualname__", None)
        d = module_dict(sys.modules.get(mod)) if type(mod) is str else None
        if type(d) is not dict or holds(d, qual) is not v:
            raise NoReuse("persist-library-value:native-function")
        return ("native", mod, qual)
    if kind == "jit":
        parts = read(v)
        if parts is None:  # (its ``_fun`` not what it calls: review 97)
            raise NoReuse("persist-library-value:jit")
        return ("jit", *(_attr(x, depth + 1) for x in parts), _held(v, depth))
    a = np.asarray(v)
    return ("jax", a.dtype.str, str(a.dtype), a.shape, _digest(a), bool(v.weak_type),
            repr(v.sharding), bool(v.committed))  # fmt: skip


def _opaque(v: Any, t: type, depth: int) -> tuple:
    """The C objects real libraries' classes hold, each by what it holds: a code
    object by its content, a union by its members, a weak reference by what it
    refers to, a named tuple's field getter by its index; a singleton or a bare
    ``object()`` (a sentinel: by the names it is held under alone) by its type."""
    if t is types.CodeType:
        return ("code", code_digest(v))
    if t is types.UnionType:
        return ("union", _attr(v.__args__, depth + 1))
    if t is weakref.ref:  # (and what it calls when that dies)
        return ("weakref", *(_attr(x, depth + 1) for x in _BASES[t](v)))
    if t is _TUPLEGETTER:
        return ("tuplegetter", *t.__reduce__(v)[1])  # (its index and docstring)
    if t is _LRU:
        return _lru(v, depth)
    if t is types.MappingProxyType:  # (what it wraps, all of it: a dict subclass's or
        inner = gc.get_referents(v)  # a mapping's class answers ``MP[k]``: review 198)
        if len(inner) != 1:
            raise NoReuse("persist-library-value:mappingproxy")
        return ("mappingproxy", _attr(inner[0], depth + 1))
    if t in _LOCKS:  # (one held now is refused: code may read that, ``locked()``;
        # an RLock says so in its repr alone, in 3.11: review 198)
        if t.locked(v) if t is _LOCKS[0] else not t.__repr__(v).startswith("<unlocked"):
            raise NoReuse("persist-library-value:held-lock")
        return ("lock", t.__name__)
    return ("const", t.__name__)


def _lru(v: Any, depth: int) -> tuple:
    """An ``lru_cache`` wrapper by what `_class_homes.lru_parts` reads (what it holds
    cached is state) and its own dict."""
    wrapped, size, typed = lru_parts(v)
    return ("lru", _attr(wrapped, depth + 1), size, typed, _held(v, depth))


_DESCRIPTORS = frozenset({types.GetSetDescriptorType, types.MemberDescriptorType,
                          types.WrapperDescriptorType, types.MethodDescriptorType,
                          types.ClassMethodDescriptorType})  # fmt: skip
_TUPLEGETTER = type(collections.namedtuple("_T", "a").a)
#: An ABC's registry and caches (``_abc_impl``, C state): its registrations are keyed
#: apart (`_persist_abcs`), its caches follow from them.
_ABC_DATA = type(vars(abc.ABC).get("_abc_impl", NotImplemented))
_LRU = functools._lru_cache_wrapper
#: Locks (C state: held or not), by their type where not held.
_LOCKS = (type(threading.Lock()), type(threading.RLock()))
_OPAQUE = frozenset({types.CodeType, types.UnionType, weakref.ref, _TUPLEGETTER,
                     type(NotImplemented), type(...), object, _ABC_DATA, _LRU,
                     types.MappingProxyType, *_LOCKS})  # fmt: skip


def _base(v: Any, t: type, depth: int) -> tuple:
    """The value a subclass of a builtin holds in its C part (a NamedTuple's items,
    a ``float`` subclass's number: review 180), read by the base type's own methods."""
    for base in _BASES:
        if base in mro(t):
            if base is tuple:
                return tuple(_attr(tuple.__getitem__(v, i), depth + 1)
                             for i in range(tuple.__len__(v)))  # fmt: skip
            if base is dict:  # (an OrderedDict's items in its order: `items`)
                return tuple((_attr(k, depth + 1), _attr(x, depth + 1)) for k, x in items(v))
            if base is list:
                return tuple(_attr(x, depth + 1) for x in list.copy(v))
            if base is set or base is frozenset:  # (its own table, as the interpreter
                return _members(list(frozenset(v)), depth)
            return _attr(_BASES[base](v), depth + 1)
    return ()


def _members(xs: list, depth: int) -> tuple:
    return unordered(xs, [_attr(x, depth + 1) for x in xs])


def _dunder(name: Any) -> bool:
    return type(name) is str and name[:2] == "__" == name[-2:]


def _digest(a: np.ndarray, depth: int = 0) -> Any:
    """An array's bytes (C order), digested; an object array's items, each by `_attr`
    (at most 4096 of them, else refused)."""
    if not a.dtype.hasobject:
        return hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()
    if a.size > 4096:
        raise NoReuse("persist-library-value:object-array")
    return tuple(_attr(x, depth + 1) for x in np.ndarray.ravel(a, order="C").tolist())


def _layout(a: np.ndarray, depth: int) -> tuple:
    """How an array lies in memory, which code may read (``ravel(order="K")``, its
    flags: review 189), and its base, by what it is (``a.base``: an int32 buffer seen
    as bytes, review 201)."""
    f, base = _ND["flags"](a), _ND["base"](a)
    held = () if base is None else _attr(base, depth + 1)
    return (_ND["strides"](a), f.writeable, f.aligned, f.owndata, base is None, held)


#: (module, name) of the standard library's immutable value types: named, not imported
#: (a value of one exists only where its module is loaded)
_REPRS = frozenset({("decimal", "Decimal"), ("fractions", "Fraction"), ("datetime", "date"),
                    ("datetime", "datetime"), ("datetime", "time"), ("datetime", "timedelta"),
                    ("datetime", "timezone"), ("uuid", "UUID"), ("re", "Pattern"),
                    ("pathlib", "PurePosixPath"), ("pathlib", "PosixPath"),
                    ("builtins", "bytearray")})  # fmt: skip


def _stdlib_value(t: type) -> bool:
    _, qual, mod = names(t)
    if (mod, qual) not in _REPRS:
        return False
    m = sys.modules.get(mod)  # (that very type: not a program's class of that name)
    return (module_dict(m) or {}).get(qual) is t if m is not None else False


_REPR_PARTS = {"Fraction": ("_numerator", "_denominator"), "UUID": ("int", "is_safe")}
_DTYPES = frozenset(id(type(np.dtype(c))) for c in np.typecodes["All"])
_BASES = {int: int.__int__, float: float.__float__, complex: complex.__complex__,
          str: str.__str__, bytes: bytes.__bytes__, tuple: None, dict: None, list: None,
          set: None, frozenset: None,
          # (C fields a subclass keeps: numpyro's ``dependent_property``, typing's
          # ``_CallableGenericAlias``, a ``staticmethod`` or ``weakref.ref`` subclass)
          property: lambda v: tuple(_C[property, k](v) for k in ("fget", "fset", "fdel", "__doc__")),
          types.GenericAlias: lambda v: tuple(_C[types.GenericAlias, k](v)
                                              for k in ("__origin__", "__args__", "__unpacked__")),
          staticmethod: lambda v: _wraps(staticmethod, v),
          classmethod: lambda v: _wraps(classmethod, v),
          weakref.ref: lambda v: (_referent(v), _C[weakref.ref, "__callback__"](v))}  # fmt: skip
#: (C fields by the base type's own descriptors: a subclass's attribute of that name,
#: ``fget = property(...)``, answers what the object does not call: review 192)
_C = {(t, k): t.__dict__[k].__get__ for t, ks in (
    (property, ("fget", "fset", "fdel", "__doc__")),
    (types.GenericAlias, ("__origin__", "__args__", "__unpacked__")),
    (weakref.ref, ("__callback__",)),
) for k in ks}  # fmt: skip
_PARTIAL = {k: functools.partial.__dict__[k].__get__ for k in ("func", "args", "keywords")}
_ND = {k: np.ndarray.__dict__[k].__get__ for k in ("dtype", "shape", "strides", "flags", "base")}


def _wraps(t: type, v: Any) -> tuple:
    """A static or class method's function and what it copied from it (``__doc__``,
    ``__name__``...; since 3.10 in its own dict), ``__wrapped__`` left out (the
    function itself)."""
    f = t.__dict__["__func__"].__get__(v)
    try:
        d = inst_dict(v, exact=False)
    except Override:
        raise NoReuse("persist-library-value:dict-override") from None
    if d is not None and type(d) is not dict:
        raise NoReuse("persist-library-value:dict-subclass")
    own = [(_key(k), x) for k, x in (items(d) if type(d) is dict else ())]
    return (f, tuple(sorted((k, x) for k, x in own if k != "__wrapped__" or x is not f)))


def _referent(v: weakref.ref) -> Any:
    got = weakref.ref.__call__(v)
    return ("dead",) if got is None else got


_GETTERS = (operator.itemgetter, operator.attrgetter, operator.methodcaller)


def _function(f: types.FunctionType, depth: int) -> tuple:
    code = f.__code__
    digest = code_digest(code)  # (a constant with no content encoding: refused, 190)
    cells = tuple(_attr(c.cell_contents, depth + 1) if cell_bound(c) else ("empty",)
                  for c in f.__closure__ or ())  # fmt: skip
    kwd = sorted((_key(k), _attr(x, depth + 1)) for k, x in items(f.__kwdefaults__ or {}))
    own = sorted((_key(k), _attr(x, depth + 1)) for k, x in items(f.__dict__))  # (``fn.k``)
    # (and what it holds in its own C fields, which code may set and read: its names,
    # docstring, annotations: a factory's ``def cast(a) -> dt``)
    fields = [_attr(_doc(k, _FN_FIELDS[k](f)), depth + 1) for k in _FN_FIELDS]
    return (
        "fn",
        digest,
        code.co_firstlineno,
        cells,
        _attr(f.__defaults__ or (), depth + 1),
        tuple(kwd),
        _globals(f, depth),
        tuple(own),
        *fields,
        _builtins(_FN_BUILTINS(f), depth),
    )  # fmt: skip (the builtins it runs with, taken
    # when it was made, whatever its globals' ``__builtins__`` says now: review 194)


def _globals(f: types.FunctionType, depth: int) -> Any:
    """A function's globals: its loaded module's namespace by that module's name; a
    namespace of its own (``FunctionType(code, {...})``, a namedtuple's ``__new__``,
    code a library ``exec``s into a dict) by what it holds (review 190: one whose
    ``__name__`` says the library's module)."""
    g = f.__globals__
    where = g.get("__name__") if type(g) is dict else None
    m = sys.modules.get(where) if type(where) is str else None
    if m is not None and module_dict(m) is g:
        return where
    if type(g) is not dict:
        raise NoReuse("persist-library-value:globals")
    return ("own", tuple(sorted((_key(k), _builtins(x, depth) if k == "__builtins__"
                                 else _attr(x, depth + 1)) for k, x in items(g))))  # fmt: skip


def _builtins(x: Any, depth: int) -> Any:
    return ("builtins",) if x is _BUILTINS or x is _BUILTINS.__dict__ else _attr(x, depth + 1)


_BUILTINS = sys.modules["builtins"]
_FN_BUILTINS = _FUNCTION.__dict__["__builtins__"].__get__


_FN_FIELDS = {k: _FUNCTION.__dict__[k].__get__
              for k in ("__name__", "__qualname__", "__module__", "__doc__", "__annotations__")}  # fmt: skip


def _ends(v: Any) -> tuple:
    return (v.start, v.stop, v.step)


def _held(v: Any, depth: int) -> tuple:
    """What an instance holds in its own dict or slots (the values by `_attr`), to
    three instances down (state deeper in: documented); () for objects of C types
    (their state is not read)."""
    here = _LOCAL.__dict__  # (instances in instances, however many containers lie
    level = here.get("held", 0)  # between: review 202; from each class's shape anew)
    if level > 2:
        return ()
    here["held"] = level + 1
    try:
        return _held_now(v, depth)
    finally:
        here["held"] = level


def _held_now(v: Any, depth: int) -> tuple:
    try:
        d = inst_dict(v, exact=False)
    except Override:  # (its class defines ``__dict__``: what it holds is unseen: 189)
        raise NoReuse("persist-library-value:dict-override") from None
    if d is not None and type(d) is not dict:  # (a dict subclass set as ``__dict__``:
        raise NoReuse("persist-library-value:dict-subclass")  # review 202)
    out = [(_key(k), _attr(x, depth + 1)) for k, x in items(d)] if type(d) is dict else []
    for k in mro(type(v)):  # (each slot by its descriptor: a mangled ``__v`` too; not
        # the type's own C members, nanobind's ``__vectorcalloffset__``: an address)
        # (a class's own, whether or not ``__slots__`` still names them: review 193)
        for name, got in items(cdict(k)) if _FLAGS(k) & _HEAPTYPE else ():
            if (  # (a class statement's ``__slots__ = ("__x__",)`` is a slot, 202;
                # an extension's ``__vectorcalloffset__`` an offset: not read)
                type(got) is types.MemberDescriptorType
                and got.__objclass__ is k
                and not (_dunder(name) and (_FLAGS(k) & _IMMUTABLE or native(k)))
            ):
                try:
                    x = got.__get__(v, type(v))
                except AttributeError:  # (a slot never set)
                    out.append((_key(name), ("unset",)))
                else:
                    out.append((_key(name), _attr(x, depth + 1)))
    return tuple(out)  # (in the order its dict holds them, then its slots: review 195)


_NP_SCALARS = frozenset(id(t) for t in set(np.sctypeDict.values()))
_UTC = __import__("datetime").timezone.utc  # (``datetime.timezone``: its repr is whole)


__all__ = ["looks", "shape", "stamp"]
