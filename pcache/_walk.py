"""The key walk of trace reuse: what a callable is built from, as exact data.

Trace reuse (`pcache._trace`) serves a re-created callable the trace of an equal
callable traced before. This module decides "equal", and it fails closed: a callable
is keyed only when everything the walk reaches is of a kind on the allowlist below,
each with a lossless encoding made of ``str``, ``bytes``, ``int``, ``None`` and
tuples of them (so comparing two keys with ``==`` is comparing the encodings, never
an object's own ``__eq__``). Anything else raises `NoReuse` and the call is traced,
as without pcache, counted by reason.

What is keyed (`Walker.value`), and why each encoding is complete for its type:

* ``None``, ``bool``, ``int``, ``str``, ``bytes``, ``Ellipsis``, ``NotImplemented``
  (exact types only: a subclass may carry state or behaviour): by type and value;
  ``float`` and ``complex`` by their IEEE bits (NaN sign and payload, signed zero);
  ``range`` and ``slice`` by their start, stop and step, not by ``==``; one a library
  module holds (and a NaN) also by identity (`pcache._holders`: ``mode is FAST``).
* ``tuple``, ``list``, ``dict``, ``set``, ``frozenset``, ``OrderedDict``, ``defaultdict``
  (exact types; its factory too) element by element, in iteration order (an ``OrderedDict``'s
  own), shared and cyclic structure by back-references; recomputed on every call.
* numpy: arrays (exact ``ndarray``, no object dtype, at most `NUMPY_MAX_BYTES`) by
  dtype, shape and a digest of their bytes; scalars by dtype and bytes; dtypes by
  their type, ``str``, ``descr``, name, byte order and struct alignment (``dtype.str``
  alone merges record dtypes of one size and several float8 formats).
* JAX arrays (`ArrayImpl`): by identity, held weakly (`Walker.arrays`), checked alive and
  not deleted or donated on a reuse (`ContentWalker`, across processes: by content).
* functions: code object and globals by identity (both kept alive), name, defaults,
  keyword defaults, closure cells and ``__dict__`` by these rules. The code of a
  user function is scanned once (`code_verdict`): one that writes a closure cell it
  does not own, a global, a module's attribute or a captured container, or that
  reads state through reflection (``__globals__``, frames, ``import_module``, ...)
  is never reused. Its globals are guarded separately (`pcache._guards`).
* partials (and subclasses): function, arguments, keywords, ``__dict__``; bound
  methods: function and ``__self__``; jit objects: function and jit options;
  ``custom_jvp``/``custom_vjp``: their attributes; ``staticmethod``,
  ``classmethod``, ``property``: what they wrap; ``operator.attrgetter``/
  ``itemgetter``/``methodcaller``: their arguments.
* classes: a library class (`is_library_type`) by identity; a user class by identity
  and everything its user-defined classes of the MRO (and a user metaclass) hold:
  methods and class attributes by these rules; its ``__init__``/``__post_init__`` only
  as its own (held elsewhere, it may be called on any object: `_constructor_value`).
* instances of user classes: only frozen dataclasses (field by field, no attribute
  outside the fields, with the class's code) and NamedTuples (item by item, with the
  class's code); enum members by class, name, value and mixed-in payload. Any other user instance: no
  reuse (its ``__eq__`` may ignore what the trace reads).
* library modules, ``np.ufunc``, JAX primitives, builtin functions and ``object()``
  sentinels: by identity (immutable, or JAX's registry singletons; `pcache._reach`);
  a builtin method bound to an object: by name and that object; a library's plain
  instance a library module holds: by identity and attributes (`_library_instance`).
* `LIBRARY_VALUES`: a short list of immutable JAX values compared by their own
  ``__eq__`` and ``__hash__`` (as JAX compares static arguments), each with a reason.

User code is what is not installed library code, decided by what it is
(`pcache._usercode`): a function by its globals and code, a class by being reachable
under its name from a library module. A ``__module__`` string decides nothing.
"""

from __future__ import annotations

import builtins
import collections
import dataclasses
import enum
import functools
import inspect
import operator
import sys
import types
import weakref
from typing import Any

import numpy as np

from pcache import _canon, _compat, _introspect, _memos
from pcache._holders import holders_index, library_held
from pcache._introspect import Override, cdict, class_attr, has, inst_dict, is_a, items, mro, names
from pcache._reflection import library_function_reflects, reflective_module
from pcache._usercode import (
    NoReuse,
    code_verdict,
    import_hooked,
    is_library_code,
    is_library_module,
    is_library_type,
    module_dict,
    qualname,
)
from pcache._walk_annotations import annotations, function_node
from pcache._walk_kinds import (
    _abc,
    _annotation,
    _builtin,
    _class_value,
    _complex,
    _constructor_value,
    _descriptor,
    _Eq,
    _field,
    _float,
    _free_write,
    _held_state,
    _library_instance,
    _object,
    _operator,
    _property,
    _range,
    _reflective_format,
    _signature,
    _slice,
    _slots_of,
    _ufunc,
    _weakref,
    class_holds_module,
    enum_payload,
    equinox_module,
    is_library_float,
    library_value_types,
    module_value,
)
from pcache._walk_maps import mapping
from pcache._walk_numpy import NUMPY_MAX_BYTES, dtype, numpy_array, numpy_scalar

#: A callable whose key walk meets more objects than this is not reused.
MAX_NODES = 4096

# Argument trees made only of tuples, lists, Nones and empty dicts (JAX's kinds with
# no auxiliary data, whose ``PyTreeDef.__eq__`` compares kind and arity only, so it
# is exact: not dict keys, ``{2: a} == {2.0: a}``) -> their key; most argument trees
# are these, and walking one node by node costs more than the rest of a reuse.
_NONE_TYPE = type(None)
_PLAIN_TREES: dict = _memos.memo("walk.plain_trees", {})
#: The same, as a content walk (`pcache._persist_key.ContentWalker`) keys them
_PLAIN_TREES_CONTENT: dict = _memos.memo("walk.plain_trees_content", {})
MAX_PLAIN_TREES = 1024


# ------------------------------------------------------------ the key walk

# Immutable JAX values compared by their own __eq__/__hash__, as JAX compares static
# arguments and its own cache keys (`library_value_types`): shardings, meshes
# and partition specs (immutable; JAX keys executables by them), tree definitions
# (immutable C++ objects), devices (singletons), avals (immutable).
LIBRARY_VALUES: tuple = library_value_types()

_FUNCTION, _METHOD, _PARTIAL = types.FunctionType, types.MethodType, functools.partial
_BUILTINS = vars(builtins)  # (what library code runs with; not a function made with others)

_DC_PARAMS = type(dataclasses.dataclass(type("_P", (), {})).__dataclass_params__)
_PARTIAL_FIELD = {n: _PARTIAL.__dict__[n].__get__ for n in ("func", "args", "keywords")}
_BUILTIN = (types.BuiltinFunctionType, types.MethodWrapperType)
_DESCRIPTORS = (types.WrapperDescriptorType, types.MethodDescriptorType)
_OPERATOR_TYPES = (operator.attrgetter, operator.itemgetter, operator.methodcaller)
# Attributes of JAX's wrapper objects left out of their key.
_DOC_ATTRS = frozenset({"__annotations__"})  # (reading it is reflection: refused)
# The attributes JAX's array types keep in an instance's ``__dict__``; anything more
# was set by the program (``a.k = 2.0``: review 43), which identity does not cover.
_ARRAY_OWN: dict[type, frozenset] = {}


def plain_array(v: Any) -> bool:
    """Whether a JAX array holds no attribute of the program's own."""
    try:
        d = inst_dict(v)
    except Override:
        return False
    return not d or d.keys() <= _ARRAY_OWN.get(type(v), frozenset())


# What every class dict holds besides its own code and values.
CLASS_BOOKKEEPING = frozenset(  # (ABCMeta's subclass cache too)
    {"__dict__", "__weakref__", "__firstlineno__", "__static_attributes__", "_abc_impl"}
)


def _no_annotations(name: str, v: Any) -> bool:
    """An empty ``__annotations__``, made where something read one: as none."""
    return name == "__annotations__" and type(v) is dict and not v


# An enum member's own bookkeeping (keyed as ("E", class, name, value)); everything
# else a member or its class holds is keyed (its class's maps too).
_ENUM_MEMBER = frozenset({"_value_", "_name_", "__objclass__", "_sort_order_"})


class Walker:
    """Builds one callable's equality key (nested tuples), from its state now.

    ``pins``: objects whose ``id()`` the key holds, kept alive by the memo so an id
    is never another object's (library objects, user classes, code, globals).
    ``arrays``: the JAX arrays the key names by id, held weakly by the memo (a reuse
    checks they are alive and not deleted). ``funcs``: (globals, code, function, its
    key) of every Python function met, for the global guards and the mutation check.
    """

    __slots__ = (
        "pins", "arrays", "funcs", "bodies", "seen", "nodes", "keep", "registry", "ctor", "holders",
        "in_library",
    )  # fmt: skip
    #: Identity-free (a key comparable across processes: `pcache._persist_key`).
    content = False

    def __init__(self) -> None:
        self.registry = False  # walking JAX's registries' rules (`_guards.registry_key`)
        self.pins: list = []
        self.arrays: list = []
        self.funcs: list[tuple] = []
        self.bodies: list = []  # partials and bound methods: JAX may cache by them too
        self.seen: dict[int, int] = {}
        self.nodes = 0
        self.keep: list = []  # what `_enter` numbered, alive for the walk
        self.ctor: Any = None  # the constructor `class_code` is walking (`callable`)
        self.holders: dict | None = None  # `holders_index`, read once a walk (no user code runs)
        self.in_library = False  # walking what a library function holds (`_function`)

    def _enter(self, obj: Any) -> tuple | None:
        """A back-reference if ``obj`` was met already in this walk (shared or cyclic
        structure), else None after numbering it."""
        k = id(obj)
        n = self.seen.get(k)
        if n is not None:
            return ("@", n)
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise NoReuse("too-large")
        self.seen[k] = len(self.seen)
        self.keep.append(obj)  # alive for the walk: its id stays its own (temporaries)
        return None

    def ident(self, v: Any) -> tuple:
        """An object compared by identity (modules, library classes and functions,
        sentinels), kept alive so its id is never another object's."""
        self.pins.append(v)
        return ("id", id(v))

    def held(self, v: Any) -> Any:
        """An object a class holds whose identity only matters in this process (a
        dataclass's params: each class makes its own)."""
        return self.ident(v)

    def same(self, v: Any) -> Any:
        """A `LIBRARY_VALUES` value, compared by its own ``__eq__``."""
        self.pins.append(v)
        return _Eq(v)

    def address(self, v: int) -> Any:
        """An int that may be an object's ``id()`` (`ContentWalker.address`)."""
        return ("i", v)

    def code(self, code: types.CodeType) -> Any:
        self.pins.append(code)
        return id(code)

    def library_code(self, code: types.CodeType) -> Any:
        """An installed library's code object: where it is defined tells two of a
        library's functions apart (by identity here)."""
        return self.code(code)

    def namespace(self, g: dict) -> Any:
        """A function's globals or builtins dict (held by the key's pins)."""
        self.pins.append(g)
        return id(g)

    def _own(self, v: Any) -> dict:
        """``v``'s attributes as the interpreter holds them (never a ``__dict__``
        a class defines itself)."""
        try:
            return inst_dict(v) or {}
        except Override:
            raise NoReuse(f"dict-override:{qualname(type(v))}") from None

    def _enum(self, v: Any, t: type) -> tuple:
        d = self._own(v)
        extra = {k: x for k, x in items(d) if k not in _ENUM_MEMBER}
        name, val, payload = d.get("_name_"), d.get("_value_"), enum_payload(v)
        return ("E", self.klass(t), *map(self.value, (name, val, payload, extra)))

    def value(self, v: Any) -> Any:
        if v is None:  # (the commonest value: defaults, docs, cells)
            return _NONE
        node = self._value(v)  # (one a library holds: also by identity, ``mode is FAST``)
        held = self.holders
        if held is None:
            held = self.holders = holders_index()
        if id(v) in held and library_held(v, type(v), held):
            return ("is", node, self.ident(v))
        return node

    def _value(self, v: Any) -> Any:
        t = type(v)
        enc = _EXACT_ID.get(id(t))  # (tables by the type's identity: `_introspect.by_id`)
        if enc is not None:
            if id(t) in _SINGLETON_IDS:  # (the value is the object)
                return enc(v)
            back = self._enter(v)  # equal strings, ints, floats may be other objects
            if back is not None:
                return back
            if (t is str or t is bytes) and _reflective_format(v):
                raise NoReuse("reflective-format-string")  # "{0.gi_frame.f_globals[S]}"
            if v != v or (t is float and is_library_float(v)):  # (``nan in xs``, ``is np.inf``)
                return ("is", enc(v), self.ident(v))
            if t is int and v >= _ADDRESS_MIN:
                return self.address(v)
            return enc(v)
        if t is tuple:
            back = self._enter(v)  # (its identity: ``axes is DEFAULT_AXES``)
            if back is not None:
                return back
            return ("t", *[self.value(x) for x in v])
        method = _DISPATCH_ID.get(id(t))
        if method is not None:
            if id(t) in _NUMBERED_IDS:  # compared by identity in Python: ``len(set(getters))``
                back = self._enter(v)
                if back is not None:
                    return back
            return method(self, v)
        return self._other(v, t)

    def _other(self, v: Any, t: type) -> Any:
        # (kinds by the real type, never ``isinstance``, which a proxy fools: `_introspect`)
        if t is _compat.PyTreeDef:  # its own == says 2 == 2.0, functions by identity
            return self.treedef(v)
        if id(t) in _LIBRARY_VALUE_IDS:  # (exact types first: the common ones)
            return self._library_value(v, t)
        k = _introspect.mro_ids(t)
        if has(k, _compat.Tracer):
            raise NoReuse("captured-tracer")
        if has(k, type):
            if v is operator.attrgetter or v is operator.methodcaller:
                raise NoReuse("reflective-attrgetter")  # attrgetter(name)(fn), name computed
            return self.klass(v)
        if has(k, types.ModuleType):
            return module_value(self, v)
        if has(k, enum.Enum):
            return self._enum(v, t)
        if has(k, np.ndarray):  # a masked array, a matrix: more than its data
            raise NoReuse(f"numpy-subclass:{qualname(t)}")
        if has(k, np.generic) and is_library_type(t):
            return self.numpy_scalar(v)
        if has(k, np.dtype) and is_library_type(t):
            return self.dtype(v)
        if has(k, _BUILTIN):
            return _builtin(self, v)
        if has(k, _PARTIAL):  # subclasses (jax.tree_util.Partial)
            return self.callable(v)
        if has(k, LIBRARY_VALUES) and is_library_type(t):
            return self._library_value(v, t)
        if has(k, _compat.CUSTOM_DERIVATIVE_TYPES):
            return self.callable(v)
        if has(k, _compat.Primitive) and is_library_type(t):
            if _canon.jax_primitive_name(v) is not None:
                return self.ident(v)  # one of JAX's own
            back = self._enter(v)
            if back is not None:
                return back
            # another's (a user's): with what was set on it (``P.scale``,
            # ``multiple_results``, its impl and abstract eval)
            return ("prim", self.ident(v), self.value(dict(self._own(v))))
        user = not is_library_type(t)
        if not (user and self.in_library):
            return self._instance(v, t, k, user)
        # (a user's object in a library's: the program's code reads it; review 207)
        self.in_library = False
        try:
            return self._instance(v, t, k, user)
        finally:
            self.in_library = True

    def _instance(self, v: Any, t: type, k: Any, user: bool) -> Any:
        if has(k, tuple) and class_attr(t, "_fields") is not None:  # NamedTuples
            back = self._enter(v)  # its identity (``dn is DEFAULT``)
            if back is not None:
                return back
            if self._own(v):
                raise NoReuse(f"mutable:{qualname(t)}")  # attributes beside its items
            items = [tuple.__getitem__(v, i) for i in range(tuple.__len__(v))]
            node = ("T", self.klass(t), *[self.value(x) for x in items])
            return (*node, self.class_code(t)) if user else node
        params = class_attr(t, "__dataclass_params__")
        if _introspect.dataclass_frozen(params):
            return self._frozen_dataclass(v, t, user)
        if params is not None and (eqx := equinox_module(t)) is not None:
            return self._frozen_dataclass(v, t, user, eqx)  # (frozen by its __setattr__)
        if not user and (node := _library_instance(self, v, t)) is not None:
            return node  # (a library's sentinel, a library's singleton)
        raise NoReuse(f"value:{qualname(t)}")

    # -- containers and arrays

    def _container(self, v: Any) -> tuple:
        back = self._enter(v)
        if back is not None:
            return back
        t = type(v)
        if t is dict:
            return ("d", *[(self.value(k), self.value(x)) for k, x in items(v)])
        if t is list:
            return ("l", *[self.value(x) for x in v])
        if t is collections.OrderedDict or t is collections.defaultdict:
            return mapping(self, v, t)
        # in iteration order: a trace that loops over a set follows it
        return ("s" if t is set else "fs", *[self.value(x) for x in tuple(v)])

    def _jax_array(self, v: Any) -> tuple:
        if not plain_array(v):
            raise NoReuse(f"array-attributes:{qualname(type(v))}")
        self.arrays.append(v)
        return ("A", id(v))

    numpy_scalar = numpy_scalar
    dtype = dtype

    def _library_value(self, v: Any, t: type) -> tuple:
        try:
            hash(v)
        except Exception:
            raise NoReuse(f"unhashable:{qualname(t)}") from None
        back = self._enter(v)  # its identity (``s is DEFAULT_SHARDING``)
        if back is not None:
            return back
        # compared by its __eq__ (LIBRARY_VALUES), and by what it holds that __eq__
        # ignores or that can change (`_walk_kinds._held_state`)
        return ("v", self.ident(t), self.same(v), _held_state(self, v, t))

    def treedef(self, td: Any) -> Any:
        """A tree definition node by node: its node types and their auxiliary data
        by these rules (its own ``==`` says ``2 == 2.0`` and compares functions in
        aux data by identity). A tree of only tuples, lists, Nones and empty dicts
        has no auxiliary data, so JAX's ``==`` is exact for it: its key is memoized
        (per kind of walk)."""
        memo = _PLAIN_TREES_CONTENT if self.content else _PLAIN_TREES
        key = memo.get(td)
        if key is not None:
            return key
        key, plain = self._treedef(td)
        if plain:
            if len(memo) >= MAX_PLAIN_TREES:
                memo.clear()
            memo[td] = key
        return key

    def _treedef(self, td: Any) -> tuple[Any, bool]:
        nd = td.node_data()
        if nd is None:
            return ("TD*",), True
        t, aux = nd
        kids = [self._treedef(c) for c in td.children()]
        plain = (t is tuple or t is list or t is _NONE_TYPE) and aux is None
        plain = plain or (t is dict and type(aux) is list and not aux)
        plain = plain and all(p for _, p in kids)
        return ("TD", self.klass(t), self.value(aux), *[k for k, _ in kids]), plain

    def signature(self, sig: Any) -> tuple:
        """JAX's argument signature: static arguments by these rules (JAX compares
        them with ``==``), argument names, and each dynamic argument's tree."""
        return (
            "S",
            self.value(tuple(sig.static_args)),
            tuple(sig.static_arg_names),
            tuple(sig.dynamic_arg_names),
            tuple(self.treedef(td) for td in sig.dynamic_arg_treedefs),
        )

    # -- user data

    def _frozen_dataclass(self, v: Any, t: type, user: bool, eqx: tuple = ()) -> tuple:
        """Field by field, by these rules (not by its ``__eq__``: ``1 == 1.0``), and,
        for a user class, with its code. ``eqx``: an equinox Module's (`equinox_module`:
        the library bases it may have, the attributes beside its fields, keyed too)."""
        back = self._enter(v)
        if back is not None:
            return back
        bases, wrapper = eqx or ((), ())
        if any(k is not object and k not in bases and is_library_type(k) for k in mro(t)[1:]):
            # a dataclass over a list, a dict, a library class: more than its fields
            raise NoReuse(f"dataclass-base:{qualname(t)}")
        fields = class_attr(t, "__dataclass_fields__") or {}
        items = []
        extra = self._own(v)
        for name in fields:
            if name in extra:  # (as a flatten reads it: ``obj.__dict__.get``)
                items.append(self.value(extra[name]))
                continue
            try:  # a slot's, or absent and the class's default (review 68)
                items.append(("class", self.value(object.__getattribute__(v, name))))
            except AttributeError:
                items.append(("unset",))
        if extra and set(extra) - set(fields) - set(wrapper):
            raise NoReuse(f"mutable:{qualname(t)}")  # attributes set outside its fields
        items += [(k, self.value(extra[k])) for k in wrapper if k in extra]
        for k in mro(t):
            slots = cdict(k).get("__slots__", ())
            if isinstance(slots, str):
                slots = (slots,)
            if set(slots) - set(fields) - {"__weakref__", "__dict__"}:
                raise NoReuse(f"mutable:{qualname(t)}")  # slots outside its fields
        # (a user class whole: its names, metaclass and ABC registrations too: review 30)
        return ("D", self.klass(t) if user else self.ident(t), *items)

    def klass(self, cls: type) -> tuple:
        """A class: by identity; a user class also by what it holds now (its methods
        and class attributes, which a trace may read through it)."""
        if is_library_type(cls):
            if cls is not _EMPTY and reflective_module(m := str(names(cls)[2])) and m not in _PLAIN:
                raise NoReuse(f"reflection-module:{m}.{qualname(cls)}")
            if not (self.in_library or self.registry) and class_holds_module(cls):
                raise NoReuse(f"captured-module:{qualname(cls)}")  # (``H.m.K``: review 207)
            return self.ident(cls)
        back = self._enter(cls)
        if back is not None:
            return back
        if any("__class__" in cdict(k) for k in mro(cls)[:-1]):  # see _singleton_test
            raise NoReuse(f"class-override:{qualname(cls)}")
        meta = type(cls)
        bases = tuple(self.ident(k) for k in mro(cls))  # bases may be reassigned
        outer, self.in_library = self.in_library, False  # (what the program's class holds)
        try:
            node = (
                "K",
                self.ident(cls),
                _introspect.names(cls)[:2],
                bases,
                self.class_code(cls),
                _abc(self, cls),
                tuple(self.klass(k) for k in type.__subclasses__(cls)),  # (read: review 185)
            )
        finally:
            self.in_library = outer
        if meta is not type and not is_library_type(meta):  # the metaclass whole
            return (*node, self.klass(meta))
        return node

    def class_code(self, t: type) -> tuple:
        """What a user class's instances run: the functions and values its own
        classes (the user-defined ones of its MRO) define, by these rules."""
        out = []
        for k in mro(t):
            if k is object or is_library_type(k):
                continue
            for name, attr in items(cdict(k)):
                if name in CLASS_BOOKKEEPING or _no_annotations(name, attr):
                    continue
                if name in ("__orig_bases__", "__parameters__") and type(attr) is tuple:
                    enc = ("t", *[_annotation(self, x) for x in attr])  # Base[Cfg], T
                elif name == "__annotations__" and type(attr) is dict:
                    # (what a library reads as data: a field's type, review 183)
                    g = module_dict(sys.modules.get(_introspect.names(k)[2] or ""))
                    enc = ("ann", *annotations(self, attr, g))
                elif name == "__dataclass_params__" and type(attr) is _DC_PARAMS:
                    # code may read it (``.frozen``)
                    enc = ("dcp", self.held(attr), _slots_of(self, attr))
                else:
                    enc = _class_value(self, name, attr)  # (an enum's maps and members too)
                out.append((name, enc))
        return ("code", *out)

    # -- callables

    def callable(self, f: Any) -> tuple:
        t = type(f)
        if t is _FUNCTION and f is not self.ctor:
            _constructor_value(f)  # (``INIT = C.__init__; INIT(lib_obj)``)
        back = self._enter(f)
        if back is not None:
            return back
        if t is _FUNCTION:
            return self._function(f)
        if is_a(f, _PARTIAL):  # (what partial.__call__ reads, not what a subclass says)
            d = self._own(f)
            self.bodies.append(f)
            func, args, keywords = (_PARTIAL_FIELD[n](f) for n in ("func", "args", "keywords"))
            return (
                "P",
                self.klass(t),
                self.value(func),
                self.value(args),
                self.value(keywords),
                tuple((k, self.value(x)) for k, x in items(d)) if d else (),
            )
        if t is _METHOD:
            self.bodies.append(f)
            return ("M", self.value(f.__func__), self.value(f.__self__))
        jit = _compat.jit_parts(f)
        if jit is not None:
            fun, ji = jit
            d = self._own(f)
            attrs = tuple((k, self.value(x)) for k, x in items(d)) if d else ()
            return ("J", self.value(fun), self.value(_compat.jit_info_key(ji)), attrs)
        if is_a(f, _compat.CUSTOM_DERIVATIVE_TYPES):
            own = [(k, self.value(x)) for k, x in items(self._own(f)) if k not in _DOC_ATTRS]
            return ("C", self.klass(t), *own)
        raise NoReuse(f"callable:{qualname(t)}")

    def _function(self, f: types.FunctionType) -> tuple:
        code = f.__code__
        g = f.__globals__
        if type(g) is not dict:
            raise NoReuse(f"globals-not-a-dict:{f.__qualname__}")
        if lib := is_library_code(g, code) and f.__builtins__ is _BUILTINS:  # (review 69)
            if library_function_reflects(str(g.get("__name__")), f.__name__):
                raise NoReuse(f"reflective-function:{g.get('__name__')}.{f.__name__}")
        else:
            why, reads, writes = code_verdict(code)
            if why is not None:
                raise NoReuse(why)
            if reads and import_hooked(f, reads):
                raise NoReuse(f"import-hook:{f.__qualname__}")
            for root, target in writes:
                if root[0] == "f":
                    _free_write(self, f, target, store=root == "f=")
        cells = f.__closure__
        d = f.__dict__
        outer, self.in_library = self.in_library, bool(lib)
        try:  # (its own dict as where it is met: ``fn.m.K``, review 207)
            node = function_node(self, f, code, g, lib, cells, d, outer)
        finally:
            self.in_library = outer
        self.funcs.append((g, code, f, node))
        return node

    def _cell(self, c: types.CellType) -> Any:
        try:
            v = c.cell_contents
        except ValueError:  # a cell not yet bound
            return ("empty",)
        if _introspect.plain_module(v) and is_library_module(v):  # (its reads guarded
            return module_value(self, v, held=True)  # as a global's: `_Guarding.free`)
        return self.value(v)


# Exact types with a lossless encoding of their own (no recursion). All but the
# singletons are also numbered by identity (`Walker.value`).
_PLAIN, _EMPTY = frozenset({"builtins", "typing"}), inspect.Parameter.empty  # review 25
_SINGLETONS = frozenset({type(None), bool, type(...), type(NotImplemented)})
_NONE = ("N",)
_ADDRESS_MIN = 1 << 16  # (below it no int is an object's address)
_EXACT: dict[type, Any] = {
    type(None): lambda v: _NONE,
    bool: lambda v: ("b", v),
    int: lambda v: ("i", v),
    str: lambda v: v,
    bytes: lambda v: ("y", v),
    float: _float,
    complex: _complex,
    range: _range,
    type(...): lambda v: ("...",),
    type(NotImplemented): lambda v: ("NI",),
}


_TUPLEGETTER = type(collections.namedtuple("_T", "a").a)
_DISPATCH: dict[type, Any] = {
    list: Walker._container,
    dict: Walker._container,
    collections.OrderedDict: Walker._container,
    collections.defaultdict: Walker._container,
    set: Walker._container,
    frozenset: Walker._container,
    _FUNCTION: Walker.callable,
    _PARTIAL: Walker.callable,
    _METHOD: Walker.callable,
    np.ndarray: numpy_array,
    slice: _slice,
    weakref.ref: _weakref,
    object: _object,
    inspect.Signature: _signature,
    dataclasses.Field: _field,
    np.ufunc: _ufunc,
    staticmethod: lambda w, v: ("SM", w.value(v.__func__), w.value(dict(vars(v)))),
    classmethod: lambda w, v: ("CM", w.value(v.__func__), w.value(dict(vars(v)))),
    property: _property,
    # a namedtuple field: its index and doc (immutable; read by its own __reduce__)
    _TUPLEGETTER: lambda w, v: ("TG", *map(w.value, type(v).__reduce__(v)[1])),
    **dict.fromkeys(_OPERATOR_TYPES, _operator),
    **dict.fromkeys(_DESCRIPTORS, _descriptor),
}
_NUMBERED = frozenset(
    {weakref.ref, dataclasses.Field, staticmethod, classmethod, property, _TUPLEGETTER}
    | set(_OPERATOR_TYPES)
)
if _compat.ArrayImpl is not _compat.Absent:
    _ARRAY_OWN[_compat.ArrayImpl] = frozenset()
    _ARRAY_OWN[_compat.PRNGKeyArray] = frozenset({"_impl", "_consumed", "_base_array"})
    # (by the walker's own method: the persisted key's walker keys them by content)
    _DISPATCH[_compat.ArrayImpl] = lambda w, v: w._jax_array(v)
    _DISPATCH[_compat.PRNGKeyArray] = lambda w, v: w._jax_array(v)  # typed keys: a JAX array too
    _DISPATCH[_compat.PjitFunction] = Walker.callable
_EXACT_ID, _DISPATCH_ID = _introspect.by_id(_EXACT), _introspect.by_id(_DISPATCH)
_SINGLETON_IDS, _NUMBERED_IDS, _LIBRARY_VALUE_IDS = map(
    _introspect.type_ids, (_SINGLETONS, _NUMBERED, LIBRARY_VALUES)
)


__all__ = [
    "LIBRARY_VALUES",
    "MAX_NODES",
    "NUMPY_MAX_BYTES",
    "NoReuse",
    "Walker",
]
