"""How `pcache._walk.Walker` keys the library kinds of value it accepts besides
scalars and containers: slices, weak references, ``operator`` objects, signatures
and their annotations, dataclass fields, sentinels, ufuncs and descriptors. Each
takes the walker and the value, and returns the value's key or raises `NoReuse`."""

from __future__ import annotations

import abc
import collections
import dataclasses
import enum
import functools
import hashlib
import inspect
import operator
import struct
import sys
import types
import typing
import weakref
from typing import TYPE_CHECKING, Any

import jax
import numpy as np

from pcache import _compat, _memos
from pcache._dictwatch import version
from pcache._holders import library_held, module_held
from pcache._introspect import (
    Override,
    cdict,
    inst_dict,
    is_a,
    items,
    mro,
    names,
    own_method,
    plain_module,
    type_ids,
)
from pcache._reflection import (
    _MUTATORS,
    FORMAT_REFLECTIVE,
    FORMATS,
    REFLECTIVE,
    REFLECTIVE_ATTRS,
    reflective_callable,
    reflective_module,
)
from pcache._usercode import (
    NoReuse,
    is_library_code,
    is_library_module,
    is_library_type,
    module_dict,
    qualname,
)
from pcache._usercode_imports import CONSTRUCTING

if TYPE_CHECKING:
    from pcache._walk import Walker


_STRUCT_D = struct.Struct("<d")
_STRUCT_DD = struct.Struct("<dd")


def _float(v: float) -> tuple:  # by its bits (NaN sign and payload, -0.0)
    return ("f", _STRUCT_D.pack(v))


def _complex(v: complex) -> tuple:
    return ("c", _STRUCT_DD.pack(v.real, v.imag))


def _range(v: range) -> tuple:
    return ("r", v.start, v.stop, v.step)


def _slice(w: Walker, v: slice) -> tuple:
    return ("sl", w.value(v.start), w.value(v.stop), w.value(v.step))


def _weakref(w: Walker, v: weakref.ref) -> tuple:
    target = v()
    callback = v.__callback__  # code can read and call it
    return ("W", None if target is None else w.value(target), w.value(callback))


def _operator(w: Walker, v: Any) -> tuple:
    if not w.registry:
        # Only as a registry's rule (`register_pytree_node_class`'s flatten is a
        # methodcaller): held by user code, ``type(v)(name)`` builds one from a name
        # computed while tracing (review 25).
        raise NoReuse("reflective-attrgetter")
    made, args = v.__reduce__()[:2]  # methodcaller's keywords are in ``made``
    names = args if isinstance(v, (operator.attrgetter, operator.methodcaller)) else ()
    if type(made) is functools.partial:  # (its name then in the partial: review 24)
        names = (*made.args, *names)
    for n in names:
        parts = n.split(".") if isinstance(n, str) else ()
        if any("__" in a or a in REFLECTIVE or a in REFLECTIVE_ATTRS for a in parts):
            raise NoReuse("reflective-attrgetter")  # attrgetter("tb_frame.f_globals")
    t = type(v)
    if made is t:  # (the class itself: the walk refuses it as a value, see `_other`)
        made = ("cls",)
    elif type(made) is functools.partial and made.func is t:  # a methodcaller's keywords
        made = ("kw", w.value(made.args), w.value(made.keywords))
    else:
        made = w.value(made)
    return ("op", w.ident(t), made, w.value(args))


_TYPING_MODULES = frozenset({"typing", "types", "typing_extensions"})


_TYPING_PARTS = ("__origin__", "__args__", "__metadata__", "__bound__", "__constraints__")


_MODULE_NAMES: dict = _memos.memo("walk.module_names", {})  # id -> (module, dicts, lens, digest)
_DICT_NAMES: dict = _memos.memo("walk.dict_names", {})  # id -> (dict, version, digest)


def module_value(w: Any, v: types.ModuleType, held: bool = False) -> tuple:
    """A module the walk meets as a value. Held by library code (what that code reads
    from it is the library's own state): by identity and its names and its
    submodules' (``hasattr(m, ...)``: reviews 55, 57). Held where the program's code
    may read it (a user function's cell or default, a container, an instance):
    refused, as what is read from it is guarded only through a global's chain or an
    import (review 206: ``m.K`` of a library module whose own ``global K`` rebinds it),
    or a function's free variable (``held``: its reads guarded as a global's).
    A registered rule's (`pcache._guards.registry_key`) is keyed as a library's: one
    refusal there would refuse every call of the process (``stablehlo`` in a user
    lowering rule's cell); what such a rule reads from it is not seen (README)."""
    lib = plain_module(v) and is_library_module(v)
    if lib and reflective_module(v.__name__):  # ``ins.stack()``: frames (review 24)
        raise NoReuse(f"reflection-module:{v.__name__}")
    if lib and (w.in_library or w.registry or held):
        return (w.ident(v), module_names(v))
    raise NoReuse(f"captured-module:{v.__name__}")


_HOLDS_MODULE: dict = _memos.memo("walk.class_holds_module", {})  # id -> (class, answer)


def class_holds_module(cls: type) -> bool:
    """Whether a library class (or a class of its MRO) holds a module as a class
    attribute: what the program's code reads through it (``H.m.K``) is not guarded
    (review 207). Memoized per class (a class attribute set after the first key is
    documented as not seen)."""
    e = _HOLDS_MODULE.get(id(cls))
    if e is not None and e[0] is cls:
        return e[1]
    got = any(
        plain_module(y)
        for k in mro(cls)
        for x in cdict(k).values()
        for y in (
            (x.__func__,)
            if type(x) in (staticmethod, classmethod)
            else (x.fget, x.fset, x.fdel)
            if type(x) is property
            else (x,)
        )  # fmt: skip
    )
    if len(_HOLDS_MODULE) > 4096:
        _HOLDS_MODULE.clear()
    _HOLDS_MODULE[id(cls)] = (cls, got)
    return got


def module_names(m: types.ModuleType) -> str:
    """The names library module ``m`` holds and its submodules hold, by digest (what
    ``hasattr(m, "sub")`` of a module held as a value answers: reviews 55, 57).
    Memoized per module while its and its submodules' namespace sizes stay (a
    submodule's import adds a name; a name deleted and another bound in its place
    is monkeypatching library state, documented), and each namespace's names per
    dict while it is not written (`_dictwatch.version`: numpy's, held by many
    modules, read once)."""
    d = module_dict(m) or {}
    e = _MODULE_NAMES.get(id(m))
    lens = (len(d), len(sys.modules))
    if e is not None and e[0] is m and e[2] == (*lens, *map(len, e[1])):
        return e[3]
    subs = [(k, module_dict(s) or {}) for k, s in items(d) if plain_module(s)]
    # and which of its submodules are loaded, at any depth (``hasattr(m.a.b, "c")``:
    # review 76; in process, which modules are loaded is keyed too)
    name = d.get("__name__")
    deep = sorted(k for k in list(sys.modules) if type(k) is str and k.startswith(f"{name}."))
    names = (_names(d), tuple((k, _names(sd)) for k, sd in subs), tuple(deep))
    got = hashlib.sha256(repr(names).encode()).hexdigest()
    dicts = [sd for _, sd in subs]
    _MODULE_NAMES[id(m)] = (m, dicts, (*lens, *map(len, dicts)), got)
    return got


def _names(d: dict) -> str:
    """The digest of the names namespace ``d`` holds, memoized per dict version."""
    now = version(d)
    e = _DICT_NAMES.get(id(d))
    if e is not None and e[0] is d and e[1] == now:
        return e[2]
    keys = tuple(d)
    try:  # (a separator no name holds: injective; repr, 5x slower, for any other)
        text = "\0".join(keys)
        if text.count("\0") != max(len(keys) - 1, 0):
            text = repr(keys)
    except TypeError:  # (a key that is not a str)
        text = repr(keys)
    got = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    if len(_DICT_NAMES) > 4096:
        _DICT_NAMES.clear()
    _DICT_NAMES[id(d)] = (d, now, got)  # (held: the id stays its)
    return got


_TYPING_BASES = (typing.NamedTuple, typing.TypedDict)
_SPECIAL_FORMS = {id(v): v for v in vars(typing).values() if isinstance(v, typing._SpecialForm)}


def _annotation(w: Walker, a: Any, depth: int = 0) -> Any:
    """An annotation: a value by the walk's rules, or a typing construct by its text
    and, part by part, what it holds (``Annotated[float, scaled]``'s ``scaled``, a
    ``TypeVar``'s bound, a generic's arguments: code can read through them)."""
    if depth == 0 and any(a is b for b in _TYPING_BASES):
        return w.ident(a)  # (``NamedTuple`` in a class's ``__orig_bases__``: a marker)
    if _SPECIAL_FORMS.get(id(a)) is a:
        return w.ident(a)  # ``Union``, ``Optional``, ``ClassVar``: typing's own, all slots
    try:
        return w.value(a)
    except NoReuse:
        t = type(a)
        if not (is_library_type(t) and getattr(t, "__module__", None) in _TYPING_MODULES):
            raise
        if depth > 16:
            raise NoReuse("annotation-too-deep") from None
        parts = []
        for name in _TYPING_PARTS:
            got = getattr(a, name, None)
            if isinstance(got, tuple):
                got = tuple(_annotation(w, x, depth + 1) for x in got)
            elif got is not None:
                got = _annotation(w, got, depth + 1)
            parts.append(got)
        # and everything else it holds (a NewType's ``__supertype__``, a TypeVar's
        # variance: review 35), as the interpreter holds it
        try:
            own = [(n, x) for n, x in (inst_dict(a) or {}).items() if n not in _TYPING_PARTS]
        except Override:
            raise NoReuse(f"dict-override:{qualname(t)}") from None
        own += [(n, x) for n, x in _slot_items(a) if n not in _TYPING_PARTS]
        if t is typing.ForwardRef:  # (its code: compiled from its text, keyed)
            own = [(n, x) for n, x in own if n != "__forward_code__"]
        held = tuple((n, _annotation(w, x, depth + 1)) for n, x in own)
        return ("ann", qualname(t), repr(a), *parts, held)


def _signature(w: Walker, v: inspect.Signature) -> tuple:
    params = [
        (p.name, int(p.kind), w.value(p.default), _annotation(w, p.annotation))
        for p in v.parameters.values()
    ]
    return ("sig", *params, _annotation(w, v.return_annotation))


# Every slot of a Field (its class has no other state): checked against the class
# when pcache loads, so a slot a new Python adds is refused until it is keyed here.
_FIELD_SLOTS = ("name", "type", "default", "default_factory", "repr", "hash", "init",
                "compare", "metadata", "kw_only", "_field_type")  # fmt: skip
_FIELD_KINDS = {id(getattr(dataclasses, k)): k for k in dir(dataclasses) if k.startswith("_FIELD")}


def _field(w: Walker, f: dataclasses.Field) -> tuple:
    # what dataclasses.fields() hands to code: name, defaults, metadata, flags, its
    # kind (field, ClassVar, InitVar: review 26); the annotation by its text
    # (annotations are not run)
    if tuple(dataclasses.Field.__slots__) != _FIELD_SLOTS:
        raise NoReuse("field-slots")

    def opt(v):
        return ("MISSING",) if v is dataclasses.MISSING else w.value(v)

    kind = getattr(f, "_field_type", None)
    if kind is not None and id(kind) not in _FIELD_KINDS:
        raise NoReuse("field-kind")
    return (
        "field",
        w.value(f.name),
        opt(f.default),
        opt(f.default_factory),
        w.value(dict(f.metadata)),
        # (by type too: ``repr = 1`` is not ``repr = True``: reviews 35, 36)
        w.value((f.init, f.repr, f.hash, f.compare, f.kw_only)),
        _annotation(w, f.type),
        None if kind is None else _FIELD_KINDS[id(kind)],
    )


_SLOT_SCALARS = type_ids((bool, int, str, type(None)))  # by identity: `_introspect.by_id`


_UNSET: Any = object()


def _slot_items(v: Any) -> list[tuple[str, Any]]:
    """(name, value) of every slot of ``v``'s classes, as the interpreter holds them;
    `_UNSET` for a slot never set or deleted."""
    out = []
    for k in mro(type(v)):
        own = cdict(k)
        names = own.get("__slots__", ())
        for n in (names,) if type(names) is str else names:
            desc = own.get(n)
            if type(desc) is types.MemberDescriptorType:
                try:
                    out.append((n, desc.__get__(v, type(v))))
                except AttributeError:
                    out.append((n, _UNSET))
    return out


def _slots_of(w: Walker, v: Any) -> tuple:
    """The values of an object's slots that are scalars (a dataclass's params), by
    the walk's rules (``order = 0`` is not ``order = False``, a deleted slot is not
    ``None``: review 35)."""
    out = []
    for n, x in _slot_items(v):
        if x is _UNSET:
            out.append((n, ("unset",)))
        elif id(type(x)) in _SLOT_SCALARS:
            out.append((n, w.value(x)))
        else:
            raise NoReuse(f"value:{qualname(type(v))}")
    return tuple(out)


def _held_state(w: Walker, v: Any, t: type) -> tuple:
    """Everything a `LIBRARY_VALUES` value holds, beyond what its ``__eq__`` compares
    (a ``Mesh``'s and a ``PartitionSpec``'s compare by identity) and what can change
    in place (walked now: the key keeps no reference to compare with itself later):
    its ``__dict__`` (a ``Mesh``'s devices array, whose shape can be set, its axes,
    its cached properties, attributes set on any of them) and its slots (a
    ``PartitionSpec``'s partitions, ``unreduced``, ``reduced``); a ``Format``'s
    layout and sharding; a ``NamedSharding``'s mesh and spec (held in C++)."""
    if t is _compat.Format:
        return ("fmt", w.value(v.layout), w.value(v.sharding))
    out: list = []
    if t is jax.sharding.NamedSharding:
        out.append(("ns", w.value(v.mesh), w.value(v.spec)))
    try:
        d = inst_dict(v) or {}
    except Override:
        raise NoReuse(f"dict-override:{qualname(t)}") from None
    out += [(k, _held(w, x)) for k, x in items(d)]
    out += [(n, ("unset",) if x is _UNSET else _held(w, x)) for n, x in _slot_items(v)]
    return tuple(out)


def _held(w: Walker, x: Any, depth: int = 0) -> Any:
    """A value a library value holds: an object array (a mesh's devices) by its shape,
    strides and elements, device lists and (ordered) dicts by their items; the rest
    by the walker's rules."""
    if depth > 8:
        raise NoReuse("library-value-too-deep")
    t = type(x)
    if t is np.ndarray and x.dtype == object:
        if x.size > 65536:
            raise NoReuse("library-value-too-large")
        elems = tuple(_held(w, e, depth + 1) for e in x.flat)
        return ("oa", x.shape, x.strides, elems)
    if t is _compat.DeviceList or t is tuple or t is list:
        return (t.__name__, *[_held(w, e, depth + 1) for e in x])
    if t is collections.OrderedDict or t is dict:
        return ("od", *[(w.value(k), _held(w, e, depth + 1)) for k, e in items(x)])
    return w.value(x)


def _abc(w: Walker, cls: type) -> tuple:
    """The classes registered on an ABC and on each of its subclasses
    (``isinstance`` answers by all of them)."""
    if not is_a(cls, abc.ABCMeta):
        return ()
    found = []
    todo, met = [cls], set()
    while todo:
        k = todo.pop()
        if id(k) in met:
            continue
        met.add(id(k))
        if len(met) > 256:
            raise NoReuse(f"abc-too-large:{qualname(cls)}")
        try:
            registry = abc._get_dump(k)[0] if is_a(k, abc.ABCMeta) else ()
            todo += type.__subclasses__(k)
        except Exception:
            raise NoReuse(f"abc:{qualname(cls)}") from None
        found += [c for r in registry if (c := r()) is not None]
    subs = sorted((qualname(c), w.ident(c)) for c in found)
    return ("abc", *subs, *map(w.klass, found))


def _property(w: Walker, v: property) -> tuple:
    return ("PR", w.value(v.fget), w.value(v.fset), w.value(v.fdel), w.value(v.__doc__))


def _object(w: Walker, v: Any) -> tuple:
    return w.ident(v)  # a bare sentinel: no state


def _ufunc(w: Walker, v: np.ufunc) -> tuple:
    # numpy's own (immutable); np.frompyfunc's wrap a Python function: not keyed
    if getattr(np, v.__name__, None) is not v:
        raise NoReuse(f"value:ufunc:{v.__name__}")
    return w.ident(v)


def _descriptor(w: Walker, v: Any) -> tuple:
    name = getattr(v, "__name__", None)
    if name in REFLECTIVE or name in REFLECTIVE_ATTRS or name in FORMATS:
        raise NoReuse(f"reflective-method:{name}")  # GA = object.__getattribute__
    if name in _MUTATORS:  # ``UPD = dict.update``: writes its first argument (review 61)
        raise NoReuse(f"writes-argument:{name}")
    if t := getattr(v, "__objclass__", None):
        if not is_library_type(t):
            raise NoReuse(f"value:{qualname(type(v))}")
    return w.ident(v)


_FORMAT_NAMES = ("__", *FORMAT_REFLECTIVE)
_FORMAT_BYTES = tuple(n.encode() for n in _FORMAT_NAMES)


def is_library_float(v: float) -> bool:
    """Whether a loaded library module holds the float ``v`` itself as an attribute
    (``np.inf``, ``math.pi``): code may compare a value with it by identity. Read
    from the index of library namespaces the walk reads anyway (`pcache._holders`)."""
    return module_held(v)


def _reflective_format(v: str | bytes) -> bool:
    """A format string that reaches frames, globals or dunders (``str.format`` reads
    attributes by the names it holds)."""
    if isinstance(v, str):
        return "{" in v and any(n in v for n in _FORMAT_NAMES)
    return b"{" in v and any(n in v for n in _FORMAT_BYTES)


def library_value_types() -> tuple[type, ...]:
    """Immutable JAX values trace reuse compares by their own ``__eq__`` (as JAX
    compares static arguments): shardings, meshes and partition specs (JAX keys
    executables by them), tree definitions and devices, PRNG key dtypes, layouts,
    and JAX's "unspecified" and "auto" sentinels (singletons without state)."""
    if not _compat.JIT_SEAM:  # pragma: no cover
        return ()
    c = _compat
    auto = c.AutoLayoutSingleton
    return (
        jax.sharding.NamedSharding,
        c.SingleDeviceSharding,
        c.GSPMDSharding,
        jax.sharding.PartitionSpec,
        c.Mesh,
        c.AbstractMesh,
        c.Device,
        c.KeyTy,
        c.UnspecifiedValue,
        auto if isinstance(auto, type) else type(auto),
        c.Layout,
        c.Format,
    )


class _Eq:
    """A `LIBRARY_VALUES` value inside a key: equal to another of the same type that
    its own ``__eq__`` says is equal (the type is in the key beside it)."""

    __slots__ = ("v", "h")

    def __init__(self, v: Any) -> None:
        self.v = v
        self.h = hash(v)

    def __eq__(self, other: object) -> bool:
        return type(other) is _Eq and type(other.v) is type(self.v) and bool(other.v == self.v)

    def __hash__(self) -> int:
        return self.h


def _free_write(w: Walker, f: types.FunctionType, target: tuple, store: bool = False) -> None:
    """A write through a free variable (``box.n = 1``, ``log.append(v)``):
    only to a library module or class (taken as fixed), else never reused."""
    try:
        v = f.__closure__[f.__code__.co_freevars.index(target[0])].cell_contents
    except (ValueError, TypeError, IndexError):
        return  # not one of f's own free variables, or unbound
    for attr in target[1:]:
        if not (plain_module(v) and is_library_module(v)):
            raise NoReuse(f"writes-attribute:{'.'.join(target)}")  # (past a class: review 61)
        v = getattr(v, attr, None)
    if plain_module(v) and is_library_module(v) and not store:
        return  # a library function named like a mutator (``np.append``)
    # (a class's: unbound, ``L.append(lib_list, 1)`` writes its argument: review 61)
    raise NoReuse(f"writes-attribute:{'.'.join(target)}")


# What an enum member of a mixed-in builtin type is as that type, read without its
# class's methods (``class E(int, Enum)`` with a ``__new__`` that sets ``_value_``
# apart from the int: review 54).
_ENUM_PAYLOADS = {
    int: int.__int__,
    str: str.__str__,
    float: float.__float__,
    complex: complex.__complex__,
    bytes: bytes.__bytes__,
}
_ENUM_BASES = frozenset(
    {object, enum.Enum, enum.IntEnum, enum.Flag, enum.IntFlag, enum.StrEnum, enum.ReprEnum}
)
_HEAPTYPE = 1 << 9  # (Py_TPFLAGS_HEAPTYPE: a class made by a class statement)
_FLAGS = type.__dict__["__flags__"].__get__  # (not a metaclass's ``__flags__``)


def enum_payload(v: Any) -> Any:
    for c in type(v).__mro__:
        conv = _ENUM_PAYLOADS.get(c)
        if conv is not None:
            return (conv.__qualname__, conv(v))
        if c not in _ENUM_BASES and not _FLAGS(c) & _HEAPTYPE:
            raise NoReuse("enum-payload")  # (a tuple, a date: C-level data)
    return None


# -- constructors (review 63)


def _class_value(w: Walker, name: str, attr: Any) -> Any:
    """What a user class holds under ``name``; its own ``__init__``/``__post_init__``
    as its constructor, whose scan trusts its ``self`` as the object under
    construction (`_usercode_imports.fresh_locals`)."""
    if name not in CONSTRUCTING:
        return w.value(attr)
    w.ctor = attr
    try:
        return w.value(attr)
    finally:
        w.ctor = None


def _constructor_value(f: types.FunctionType) -> None:
    """A user constructor met as anything but its class's own (a global, a cell, a
    default, a bound method: ``INIT = C.__init__; INIT(lib_obj)``) may be called on
    any object, whose attributes its trusted ``self`` then writes: never reused."""
    if f.__code__.co_name in CONSTRUCTING and not is_library_code(f.__globals__, f.__code__):
        raise NoReuse(f"constructor-as-value:{f.__qualname__}")


def _builtin(w: Walker, v: Any) -> tuple:
    """A builtin function, or a builtin method bound to its object."""
    bound = getattr(v, "__self__", None)
    if is_a(bound, types.ModuleType) and v.__name__.startswith("__"):
        raise NoReuse(f"reflective-method:{v.__name__}")  # cfg.__getattribute__
    if bound is None or plain_module(bound):
        why = reflective_callable(v)
        if why is not None:
            raise NoReuse(why)
        return w.ident(v)
    if v.__name__ in REFLECTIVE or v.__name__ in REFLECTIVE_ATTRS:
        raise NoReuse(f"reflective-method:{v.__name__}")  # Base.__subclasses__
    if not own_method(v, bound):  # int.__repr__.__get__(True): another impl
        raise NoReuse(f"builtin-method-impl:{v.__name__}")
    return ("B", v.__name__, w.ident(type(bound)), w.value(bound))


def _library_instance(w: Walker, v: Any, t: type) -> tuple | None:
    """An instance of library class ``t`` whose state is its attributes alone (else
    None): no builtin base but ``object`` (whose C state a dict's items or a list's
    would be), no slot, no module of reflection. What it does is then its class's
    library code over those attributes. One a library module holds (a library's
    ``MISSING``, equinox's; a singleton such as numpyro's ``constraints.real_vector``,
    a user distribution's ``support``) is keyed by its class, identity and
    attributes, walked again on every walk; one the program made (numpyro's ``NUTS``,
    ``MCMC``, transforms, handlers), by its class and attributes, never its identity:
    an equal one made again (``MCMC(NUTS(model))`` each run, in another process) is the
    same program; identity relations within a walk are kept by its numbering. Every
    attribute is keyed, memos too: numpyro's ``MCMC._cache``, keyed by argument ids,
    is read while ``_single_chain_mcmc`` is traced (review 114), so such an MCMC keys
    differently in each process."""
    k = mro(t)
    if k[-1] is not object or any(not _FLAGS(c) & _HEAPTYPE for c in k[:-1]):
        return None
    # A class statement's layout: an object's, with a dict and weak references. A C
    # type made by ``PyType_FromSpec`` is a heap type too, its state in C
    # (``threading.local``, ``array.array``, a hashlib object: review 69).
    if _BASICSIZE(t) != _PLAIN_SIZE or not _DICTOFFSET(t):
        return None
    if any(reflective_module(str(names(c)[2])) for c in k[:-1] if c is not typing.Generic):
        return None  # (weakref.finalize: its state in a class-level registry, review 69)
    try:
        d = inst_dict(v)  # (none: no dict of its own)
    except Override:
        return None
    if d is None or any(x is not _UNSET for _, x in _slot_items(v)):
        return None
    if any(type(n) is not str for n in d):
        return None
    # (held by a library now, by any holder: not every name read back, whose cost
    # grows with the classes holding one object, numpyro's ``constraints.real`` as
    # hundreds of distributions' ``support``; across processes `ContentWalker.ident`
    # names it or refuses)
    held = library_held(v, t)
    if not d and held:
        return ("sentinel", w.ident(t), w.ident(v))
    back = w._enter(v)
    if back is not None:
        return back
    if not held:  # (one the program made: by class and attributes, every one of them)
        return ("made", w.ident(t), tuple((n, w.value(x)) for n, x in items(d)))
    return ("plain", w.ident(t), w.ident(v), tuple((n, w.value(x)) for n, x in items(d)))


class _Plain:  # (the layout of a class statement's instances)
    pass


_BASICSIZE = type.__dict__["__basicsize__"].__get__
_DICTOFFSET = type.__dict__["__dictoffset__"].__get__
_PLAIN_SIZE = _BASICSIZE(_Plain)


# -- equinox Modules


def equinox_module(t: type) -> tuple | None:
    """(the library bases it may have, the attributes beside its fields it may hold)
    where ``t`` is a class of equinox Modules (installed equinox's ``Module`` in its
    MRO, proven library code, whose ``__setattr__`` and ``__delattr__`` are the
    ones ``Module`` has: an instance's fields are set only while it is built,
    as a frozen dataclass's are; its wrapped function's names and annotations, which
    ``module_update_wrapper`` sets, are keyed with them); else None."""
    m = sys.modules.get("equinox._module._module")
    d = module_dict(m) if m is not None else None
    base = d.get("Module") if d is not None and is_library_module(m) else None
    if not is_a(base, type) or not is_library_type(base):
        return None
    k = mro(t)
    if base not in k or any(
        _resolved(k, n) is not _resolved(mro(base), n) for n in ("__setattr__", "__delattr__")
    ):
        return None
    bases = {base, *mro(base), typing.Generic, abc.ABC}
    bases |= {c for c in k if is_library_type(c) and base in mro(c)}  # (diffrax's terms)
    wrapper = d.get("WRAPPER_FIELD_NAMES")
    return tuple(bases), wrapper if type(wrapper) is tuple else ()


def _resolved(k: tuple, name: str) -> Any:
    """What ``name`` resolves to along MRO ``k`` (the first class defining it)."""
    for c in k:
        got = cdict(c).get(name, _UNSET)
        if got is not _UNSET:
            return got
    return _UNSET


def jit_options(w: Walker, ji: Any) -> tuple:
    """JAX's jit options (`_compat.jit_info_key`: its function's name, shardings,
    layouts, static and donated arguments, ...) as the walk keys them, the common
    ones without it (a re-created jit walks them on every call): exact strings,
    booleans and ints each tagged with its type (``1 == True`` in a tuple), tuples
    of exact ints or strings, and sharding leaves that are all None or JAX's
    "unspecified" (which JAX tells by its class alone). Any other option by the
    walk's rules."""
    out: list = []
    for x in _compat.jit_info_key(ji):
        t = type(x)
        if x is None or t is bool or t is int or t is str:
            out.append((t.__name__, x))
        elif t is tuple and all(type(e) is int for e in x):
            out.append(("ints", x))
        elif t is tuple and all(type(e) is str for e in x):
            out.append(("strs", x))
        elif t is tuple and all(e is None or _unspecified(e) for e in x):
            out.append(("leaves", *[e is None for e in x]))
        elif t is _compat.PyTreeDef:
            out.append(w.treedef(x))
        else:
            out.append(w.value(x))
    return tuple(out)


def _unspecified(e: Any) -> bool:
    try:
        return type(e) is _compat.UnspecifiedValue and not inst_dict(e)
    except Override:
        return False
