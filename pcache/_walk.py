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
  ``range`` and ``slice`` by their start, stop and step, not by ``==``.
* ``tuple``, ``list``, ``dict``, ``set``, ``frozenset`` (exact types): element by
  element, in iteration order (a trace that iterates follows it), shared and cyclic
  structure by back-references. Recomputed on every call, so mutation is seen.
* numpy: arrays (exact ``ndarray``, no object dtype, at most `NUMPY_MAX_BYTES`) by
  dtype, shape and a digest of their bytes; scalars by dtype and bytes; dtypes by
  their type, ``str``, ``descr``, name, byte order and struct alignment (``dtype.str``
  alone merges record dtypes of one size and several float8 formats).
* JAX arrays (`ArrayImpl`): by identity, held weakly (`Walker.arrays`): a reuse
  checks that each is still alive and not deleted or donated.
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
  methods and class attributes by these rules.
* instances of user classes: only frozen dataclasses (field by field, no attribute
  outside the fields, with the class's code) and NamedTuples (item by item, with the
  class's code); enum members by class, name and value. Any other user instance: no
  reuse (its ``__eq__`` may ignore what the trace reads).
* library modules, ``np.ufunc``, JAX primitives, builtin functions and ``object()``
  sentinels: by identity (immutable, or JAX's registry singletons); a builtin method
  bound to an object: by name and that object.
* `LIBRARY_VALUES`: a short list of immutable JAX values compared by their own
  ``__eq__`` and ``__hash__`` (as JAX compares static arguments), each with a reason.

User code is what is not installed library code, decided by what it is: a function
by its globals being the ``__dict__`` of an imported module whose file lies in the
standard library or a site-packages directory (or pcache itself), a class by being
reachable under its name from such a module. A ``__module__`` string decides
nothing.
"""

from __future__ import annotations

import abc
import dataclasses
import dis
import enum
import functools
import hashlib
import inspect
import operator
import os
import struct
import sys
import sysconfig
import types
import weakref
from typing import Any

import numpy as np

from pcache import _compat

#: Captured numpy arrays larger than this are not hashed on every call: no reuse.
NUMPY_MAX_BYTES = 256 * 1024
#: A callable whose key walk meets more objects than this is not reused.
MAX_NODES = 4096

# Argument trees made only of tuples, lists, Nones and empty dicts (JAX's kinds with
# no auxiliary data, whose ``PyTreeDef.__eq__`` compares kind and arity only, so it
# is exact) -> their key; most argument trees are these, and walking one node by
# node costs more than the rest of a reuse.
_NONE_TYPE = type(None)
_PLAIN_TREES: dict = {}
MAX_PLAIN_TREES = 1024


class NoReuse(Exception):  # noqa: N818 - a verdict, not an error
    """This call's callable cannot be keyed: it is traced, as without pcache."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def qualname(t: type) -> str:
    return getattr(t, "__qualname__", getattr(t, "__name__", "?"))


# ------------------------------------------------------------ library code

_LIB_DIRS = tuple(
    sorted(
        {
            os.path.realpath(p)
            for p in (
                *(sysconfig.get_paths().get(k) for k in ("stdlib", "platstdlib", "purelib")),
                *(p for p in sys.path if p.endswith(("site-packages", "dist-packages"))),
            )
            if p
        }
    )
)
_PCACHE_DIR = os.path.dirname(os.path.realpath(__file__))
_LIBRARY: dict[int, tuple[dict, bool]] = {}  # id(globals) -> (globals, verdict)
_LIBRARY_TYPES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _library_file(file: Any) -> bool:
    if not isinstance(file, str) or not file:
        return False
    real = os.path.realpath(file)
    if real.startswith(_PCACHE_DIR + os.sep):
        return True
    parts = real.split(os.sep)
    if "site-packages" in parts or "dist-packages" in parts:
        return True
    return any(real.startswith(d + os.sep) for d in _LIB_DIRS)


def is_library(g: dict) -> bool:
    """Whether a function with globals ``g`` is installed library code: ``g`` is the
    ``__dict__`` of an imported module whose file is library code (a dict that merely
    says ``__name__ = "jax"`` is not)."""
    e = _LIBRARY.get(id(g))
    if e is not None and e[0] is g:
        return e[1]
    mod = sys.modules.get(g.get("__name__") or "")
    lib = (
        mod is not None
        and getattr(mod, "__dict__", None) is g
        and isinstance(mod, types.ModuleType)
        and _library_file(g.get("__file__"))
    )
    if len(_LIBRARY) > 4096:
        _LIBRARY.clear()
    _LIBRARY[id(g)] = (g, lib)  # module dicts: kept alive, so the id is never reused
    return lib


def is_library_module(m: types.ModuleType) -> bool:
    return is_library(m.__dict__) or (
        # builtin and extension modules (sys, math, jaxlib's): no Python globals
        sys.modules.get(m.__name__) is m and not hasattr(m, "__path__") and _no_python(m)
    )


def _no_python(m: types.ModuleType) -> bool:
    file = getattr(m, "__file__", None)
    return (
        file is None
        and m.__name__ in sys.builtin_module_names
        or (isinstance(file, str) and file.endswith((".so", ".pyd")) and _library_file(file))
    )


def is_library_type(t: type) -> bool:
    """Whether class ``t`` is installed library code: reachable under its qualified
    name from the library module it names (builtins included)."""
    got = _LIBRARY_TYPES.get(t)
    if got is None:
        got = _library_type(t)
        try:
            _LIBRARY_TYPES[t] = got
        except TypeError:  # not weak-referenceable: not memoized
            pass
    return got


_HEAPTYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE: a class made at run time (a class statement)


def _library_type(t: type) -> bool:
    if not t.__flags__ & _HEAPTYPE:
        return True  # a static C type (int, NoneType, numpy's): no user code defines one
    if _compiled(t):
        return True
    mod = sys.modules.get(getattr(t, "__module__", None) or "")
    if mod is None or not isinstance(mod, types.ModuleType) or not is_library_module(mod):
        return False
    obj: Any = mod
    for part in qualname(t).split("."):
        obj = getattr(obj, part, None)
    if obj is t:
        return True
    return False  # not reachable under its name: made at run time (namedtuple(), type())


# What a class made by an extension module (nanobind's, pybind11's) holds: C slots
# and descriptors, never Python code or data.
_C_ATTRS = (
    types.BuiltinFunctionType,
    types.WrapperDescriptorType,
    types.MethodDescriptorType,
    types.MemberDescriptorType,
    types.GetSetDescriptorType,
    types.ClassMethodDescriptorType,
)


def _compiled(t: type) -> bool:
    """A heap type made by an extension module, not by a class statement: its
    module is not an imported Python module, every heap class of its MRO holds only
    C slots and descriptors, and its metaclass is one of these or a static type."""
    if sys.modules.get(getattr(t, "__module__", None) or "") is not None:
        return False
    if any(n in vars(t) for n in ("__dict__", "__weakref__", "__slots__")):
        return False  # made by a class statement or type()
    meta = type(t)
    if meta.__flags__ & _HEAPTYPE and not _compiled(meta):
        return False
    for k in t.__mro__:
        if not k.__flags__ & _HEAPTYPE:
            continue
        for name, a in vars(k).items():
            if name in ("__module__", "__doc__", "__qualname__"):
                continue
            if not isinstance(a, _C_ATTRS):
                return False
    return True


# ------------------------------------------------------------ code scans

_GLOBAL_OPS = frozenset({"LOAD_GLOBAL", "LOAD_NAME"})
_ATTR_OPS = frozenset({"LOAD_ATTR", "LOAD_METHOD"})
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
UNGUARDABLE = frozenset({"globals", "vars", "locals", "eval", "exec", "__import__", "compile"})
# Methods that mutate a builtin container (a captured list, dict or set).
_MUTATORS = frozenset(
    {
        "append",
        "extend",
        "insert",
        "pop",
        "popitem",
        "clear",
        "update",
        "add",
        "remove",
        "discard",
        "setdefault",
        "sort",
        "reverse",
        "__setitem__",
        "__delitem__",
        "__iadd__",
        "difference_update",
        "intersection_update",
        "symmetric_difference_update",
    }
)
# A value loaded from outside the function's own frame.
_OUTER_LOADS = frozenset({"LOAD_GLOBAL", "LOAD_NAME", "LOAD_DEREF", "LOAD_CLASSDEREF"})
_CODE: dict[int, tuple[types.CodeType, str | None, tuple]] = {}


_CONST_TYPES = (type(None), bool, int, float, complex, str, bytes, type(...), types.CodeType)


def _immutable_const(c: Any) -> bool:
    if type(c) in _CONST_TYPES:
        return True
    if type(c) in (tuple, frozenset):
        return all(_immutable_const(x) for x in c)
    return False


def code_verdict(code: types.CodeType) -> tuple[str | None, tuple, tuple]:
    """(why this user code is never reused, or None; what it reads from its
    globals; what it writes to). Memoized per code object (immutable; kept alive by
    the memo).

    The reads: each ``LOAD_GLOBAL`` with the attributes loaded from it right after,
    as ``(chain, escaped)``; ``escaped``: the last object of the chain goes on (to a
    call, a store, a return) rather than only being read. ``("<import>", name)``
    for an import. The writes: ``(root, target)``, an attribute stored on, or a
    container method (``append``, ``update``, ...) called on, the object a chain
    ``target`` names, from a global (``root`` "g") or a free variable ("f"); who
    owns that object is only known from the values (`pcache._guards`,
    `Walker._function`). Nested code objects are scanned with their parent."""
    e = _CODE.get(id(code))
    if e is not None and e[0] is code:
        return e[1], e[2], e[3]
    why: str | None = None
    reads: dict[tuple, None] = {}
    writes: dict[tuple, None] = {}
    stack = [(code, frozenset(code.co_freevars))]
    while stack:
        c, outer = stack.pop()
        why = why or _scan(c, outer, reads, writes)
        if not all(_immutable_const(k) for k in c.co_consts):
            why = why or "mutable-constant"  # a code object rebuilt around a list
        for k in c.co_consts:
            if isinstance(k, types.CodeType):
                # Its free variables that are ours from outside stay outside; those
                # that are our own cells are this call's locals.
                stack.append((k, frozenset(v for v in k.co_freevars if v in outer)))
    out = (why, tuple(reads), tuple(writes))
    if len(_CODE) > 8192:
        _CODE.clear()
    _CODE[id(code)] = (code, *out)
    return out


def _scan(c: types.CodeType, outer: frozenset, reads: dict, writes: dict) -> str | None:
    ins = list(dis.get_instructions(c))
    n = len(ins)
    why = None
    i = 0
    while i < n:
        op, arg = ins[i].opname, ins[i].argval
        if op in ("STORE_GLOBAL", "DELETE_GLOBAL"):
            why = why or f"writes-global:{arg}"
        elif op in ("STORE_DEREF", "DELETE_DEREF") and arg in outer:
            why = why or f"writes-nonlocal:{arg}"
        elif op in _ATTR_OPS and arg in REFLECTIVE:
            why = why or f"reflection:{arg}"
        elif op in ("STORE_SUBSCR", "DELETE_SUBSCR") and not _local_target(ins, i):
            why = why or "writes-container"
        elif op == "IMPORT_NAME":
            reads[(("<import>", arg), False)] = None
        elif op == "LOAD_CONST" and _reflective_const(arg):
            why = why or "reflection:constant"  # getattr(f, "__globals__"), a format
        if op in _GLOBAL_OPS and arg in _ATTR_BUILTINS and not _constant_attr_call(ins, i):
            why = why or f"dynamic-{arg}"  # getattr(obj, name) with a computed name
        if op in _OUTER_LOADS:
            chain = [arg]
            j = i + 1
            while j < n and ins[j].opname in _ATTR_OPS:
                chain.append(ins[j].argval)
                j += 1
            nxt = ins[j].opname if j < n else "RETURN_VALUE"
            for attr in chain[1:]:
                if attr in REFLECTIVE or attr in UNGUARDABLE:
                    why = why or f"reflection:{attr}"
            root = "g" if op in _GLOBAL_OPS else "f"
            if op in ("LOAD_DEREF", "LOAD_CLASSDEREF") and arg not in outer:
                root = ""  # one of this call's own cells
            if root and (
                nxt in ("STORE_ATTR", "DELETE_ATTR")
                or (nxt == "COPY" and j + 1 < n and ins[j + 1].opname in _ATTR_OPS)
            ):
                writes[(root, tuple(chain))] = None  # ``m.n = v``, ``m.n += 1``
            elif root and len(chain) > 1 and chain[-1] in _MUTATORS:
                writes[(root, tuple(chain[:-1]))] = None  # ``m.log.append(v)``
            if root == "g":
                reads[(tuple(chain), nxt not in ("STORE_ATTR", "DELETE_ATTR"))] = None
            i = j
            continue
        i += 1
    return why


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
)


def _reflective_const(c: Any) -> bool:
    if type(c) is str:
        return c in REFLECTIVE or any(p in c for p in _REFLECTIVE_PARTS)
    if type(c) in (tuple, frozenset):
        return any(_reflective_const(x) for x in c)
    return False


_ATTR_BUILTINS = frozenset({"getattr", "hasattr", "setattr", "delattr"})
_CALLS = frozenset({"PRECALL", "CALL", "CALL_FUNCTION", "CALL_FUNCTION_KW"})


def _constant_attr_call(ins: list, i: int) -> bool:
    """Whether the builtin loaded at ``i`` is called as ``getattr(x, "name"[, d])``:
    one plain load (with attributes) for the object, then a string constant (and a
    plain default), then the call."""
    j = i + 1
    n = len(ins)
    if j >= n or ins[j].opname not in ("LOAD_FAST", "LOAD_DEREF", "LOAD_GLOBAL", "LOAD_NAME"):
        return False
    j += 1
    while j < n and ins[j].opname in _ATTR_OPS:
        j += 1
    if j >= n or ins[j].opname != "LOAD_CONST" or type(ins[j].argval) is not str:
        return False
    j += 1
    if j < n and ins[j].opname in ("LOAD_CONST", "LOAD_FAST", "LOAD_GLOBAL"):
        j += 1  # a default
    return j < n and ins[j].opname in _CALLS


def _local_target(ins: list, i: int) -> bool:
    """Whether the container of the ``STORE_SUBSCR`` at ``i`` is a plain local
    (``d[k] = v`` with ``d`` and ``k`` locals or constants): anything else may be
    a captured or global container."""
    if i < 2:
        return False
    key, container = ins[i - 1], ins[i - 2]
    return key.opname in ("LOAD_FAST", "LOAD_CONST") and container.opname == "LOAD_FAST"


# ------------------------------------------------------------ the key walk

# Immutable JAX values compared by their own __eq__/__hash__, as JAX compares static
# arguments and its own cache keys (`_compat.library_value_types`): shardings, meshes
# and partition specs (immutable; JAX keys executables by them), tree definitions
# (immutable C++ objects), devices (singletons), avals (immutable).
LIBRARY_VALUES: tuple = _compat.library_value_types()
_LIBRARY_VALUE_TYPES = frozenset(LIBRARY_VALUES)

_STRUCT_D = struct.Struct("<d")
_STRUCT_DD = struct.Struct("<dd")
_FUNCTION = types.FunctionType
_METHOD = types.MethodType
_PARTIAL = functools.partial
_BUILTIN = (types.BuiltinFunctionType, types.MethodWrapperType)
_DESCRIPTORS = (types.WrapperDescriptorType, types.MethodDescriptorType)
_OPERATOR_TYPES = (operator.attrgetter, operator.itemgetter, operator.methodcaller)
# Attributes of JAX's wrapper objects that describe them but never reach the trace.
_DOC_ATTRS = frozenset({"__doc__", "__annotations__"})
# What every class dict holds besides its own code and values.
CLASS_BOOKKEEPING = frozenset(
    {
        "__dict__",
        "__weakref__",
        "__annotations__",
        "__slots__",
        "__dataclass_params__",
        "__orig_bases__",
        "__parameters__",
        "__firstlineno__",
        "__static_attributes__",
        "_abc_impl",  # ABCMeta's subclass cache
    }
)


# An enum member's and an enum class's own bookkeeping (their members, names and
# values, keyed as ("E", class, name, value)); everything else they hold is keyed.
_ENUM_MEMBER = frozenset({"_value_", "_name_", "__objclass__", "_sort_order_"})
_ENUM_CLASS = frozenset(
    {
        "_member_map_",
        "_member_names_",
        "_value2member_map_",
        "_unhashable_values_",
        "_member_type_",
        "_value_repr_",
        "_new_member_",
        "_use_args_",
        "_flag_mask_",
        "_singles_mask_",
        "_all_bits_",
        "_boundary_",
        "_inverted_",
    }
)


class Walker:
    """Builds one callable's equality key (nested tuples), from its state now.

    ``pins``: objects whose ``id()`` the key holds, kept alive by the memo so an id
    is never another object's (library objects, user classes, code, globals).
    ``arrays``: the JAX arrays the key names by id, held weakly by the memo (a reuse
    checks they are alive and not deleted). ``funcs``: (globals, code, function, its
    key) of every Python function met, for the global guards and the mutation check.
    """

    __slots__ = ("pins", "arrays", "funcs", "seen", "nodes", "keep")

    def __init__(self) -> None:
        self.pins: list = []
        self.arrays: list = []
        self.funcs: list[tuple] = []
        self.seen: dict[int, int] = {}
        self.nodes = 0
        self.keep: list = []  # what `_enter` numbered, alive for the walk

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
        self.pins.append(v)
        return ("id", id(v))

    def value(self, v: Any) -> Any:
        t = type(v)
        enc = _EXACT.get(t)
        if enc is not None:
            return enc(v)
        if t is tuple:
            back = self._enter(v)  # (its identity: ``axes is DEFAULT_AXES``)
            if back is not None:
                return back
            return ("t", *[self.value(x) for x in v])
        method = _DISPATCH.get(t)
        if method is not None:
            return method(self, v)
        return self._other(v, t)

    def _other(self, v: Any, t: type) -> Any:
        if isinstance(v, _compat.Tracer):
            raise NoReuse("captured-tracer")
        if isinstance(v, type):
            return self.klass(v)
        if isinstance(v, types.ModuleType):
            if type(v) is types.ModuleType and is_library_module(v):
                return self.ident(v)
            # a user module: what is read from it is guarded only for globals
            raise NoReuse(f"captured-module:{v.__name__}")
        if isinstance(v, enum.Enum):
            extra = {k: x for k, x in vars(v).items() if k not in _ENUM_MEMBER}
            return ("E", self.klass(t), v._name_, self.value(v._value_), self.value(extra))
        if isinstance(v, np.ndarray):  # a masked array, a matrix: more than its data
            raise NoReuse(f"numpy-subclass:{qualname(t)}")
        if isinstance(v, np.generic) and is_library_type(t):
            return self._numpy_scalar(v)
        if isinstance(v, np.dtype) and is_library_type(t):
            return self.dtype(v)
        if isinstance(v, _BUILTIN):
            bound = getattr(v, "__self__", None)
            if bound is None or type(bound) is types.ModuleType:
                return self.ident(v)
            return ("B", v.__name__, self.ident(type(bound)), self.value(bound))
        if isinstance(v, _PARTIAL):  # subclasses (jax.tree_util.Partial)
            return self.callable(v)
        if t is _compat.PyTreeDef:  # its own == says 2 == 2.0, functions by identity
            return self.treedef(v)
        if t in _LIBRARY_VALUE_TYPES or (isinstance(v, LIBRARY_VALUES) and is_library_type(t)):
            return self._library_value(v, t)
        if isinstance(v, _compat.CUSTOM_DERIVATIVE_TYPES):
            return self.callable(v)
        if isinstance(v, _compat.Primitive) and is_library_type(t):
            return self.ident(v)
        user = not is_library_type(t)
        if isinstance(v, tuple) and hasattr(t, "_fields"):  # NamedTuples
            if getattr(v, "__dict__", None):
                raise NoReuse(f"mutable:{qualname(t)}")  # attributes beside its items
            items = [tuple.__getitem__(v, i) for i in range(tuple.__len__(v))]
            node = ("T", self.klass(t), *[self.value(x) for x in items])
            return (*node, self.class_code(t)) if user else node
        params = getattr(t, "__dataclass_params__", None)
        if params is not None and getattr(params, "frozen", False):
            return self._frozen_dataclass(v, t, user)
        raise NoReuse(f"value:{qualname(t)}")

    # -- containers and arrays

    def _container(self, v: Any) -> tuple:
        back = self._enter(v)
        if back is not None:
            return back
        t = type(v)
        if t is dict:
            return ("d", *[(self.value(k), self.value(x)) for k, x in v.items()])
        if t is list:
            return ("l", *[self.value(x) for x in v])
        # in iteration order: a trace that loops over a set follows it
        return ("s" if t is set else "fs", *[self.value(x) for x in v])

    def _jax_array(self, v: Any) -> tuple:
        self.arrays.append(v)
        return ("A", id(v))

    def _numpy(self, a: np.ndarray) -> tuple:
        back = self._enter(a)
        if back is not None:
            return back
        if a.dtype.hasobject:
            raise NoReuse("numpy-object")
        if a.nbytes > NUMPY_MAX_BYTES:
            raise NoReuse("numpy-too-large")
        data = a.tobytes()  # C order (a memoryview refuses ml_dtypes' formats)
        digest = hashlib.blake2b(data, digest_size=16).digest()
        f = a.flags
        layout = (a.strides, f.writeable, f.c_contiguous, f.f_contiguous, f.aligned)
        return ("n", self.dtype(a.dtype), a.shape, digest, layout)

    def _numpy_scalar(self, v: np.generic) -> tuple:
        if v.dtype.hasobject:
            raise NoReuse("numpy-object")
        return ("g", self.dtype(v.dtype), v.tobytes())

    def dtype(self, dt: np.dtype) -> tuple:
        """Every property of a dtype that decides what its bytes mean."""
        if dt.hasobject:
            raise NoReuse("numpy-object")
        return (
            "dt",
            self.ident(dt.type),
            dt.str,
            repr(dt.descr),
            dt.name,
            dt.byteorder,
            dt.isalignedstruct,
            dt.itemsize,
            repr(dt),
            self.value(dict(dt.metadata)) if dt.metadata else None,
        )

    def _library_value(self, v: Any, t: type) -> tuple:
        try:
            hash(v)
        except Exception:
            raise NoReuse(f"unhashable:{qualname(t)}") from None
        self.pins.append(v)  # immutable; compared by its __eq__ (LIBRARY_VALUES)
        return ("v", self.ident(t), _Eq(v))

    def treedef(self, td: Any) -> Any:
        """A tree definition node by node: its node types and their auxiliary data
        by these rules (its own ``==`` says ``2 == 2.0`` and compares functions in
        aux data by identity). A tree of only tuples, lists, Nones and empty dicts
        has no auxiliary data, so JAX's ``==`` is exact for it: its key is memoized."""
        key = _PLAIN_TREES.get(td)
        if key is not None:
            return key
        key, plain = self._treedef(td)
        if plain:
            if len(_PLAIN_TREES) >= MAX_PLAIN_TREES:
                _PLAIN_TREES.clear()
            _PLAIN_TREES[td] = key
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

    def _frozen_dataclass(self, v: Any, t: type, user: bool) -> tuple:
        """Field by field, by these rules (not by its ``__eq__``, which says ``1 ==
        1.0`` and ``0.0 == -0.0``), and, for a user class, with its code."""
        back = self._enter(v)
        if back is not None:
            return back
        if any(k is not object and is_library_type(k) for k in t.__mro__[1:]):
            # a dataclass over a list, a dict, a library class: more than its fields
            raise NoReuse(f"dataclass-base:{qualname(t)}")
        fields = getattr(t, "__dataclass_fields__", {})
        items = []
        for name in fields:
            try:
                items.append(self.value(object.__getattribute__(v, name)))
            except AttributeError:
                items.append(("unset",))
        extra = getattr(v, "__dict__", None)
        if extra and set(extra) - set(fields):
            raise NoReuse(f"mutable:{qualname(t)}")  # attributes set outside its fields
        for k in t.__mro__:
            slots = vars(k).get("__slots__", ())
            if isinstance(slots, str):
                slots = (slots,)
            if set(slots) - set(fields) - {"__weakref__", "__dict__"}:
                raise NoReuse(f"mutable:{qualname(t)}")  # slots outside its fields
        node = ("D", self.ident(t), *items)
        return (*node, self.class_code(t)) if user else node

    def klass(self, cls: type) -> tuple:
        """A class: by identity; a user class also by what it holds now (its methods
        and class attributes, which a trace may read through it)."""
        if is_library_type(cls):
            return self.ident(cls)
        back = self._enter(cls)
        if back is not None:
            return back
        meta = type(cls)
        mro = tuple(self.ident(k) for k in cls.__mro__)  # bases may be reassigned
        names = (str(cls.__name__), str(cls.__qualname__))
        node = ("K", self.ident(cls), names, mro, self.class_code(cls), self._abc(cls))
        if meta is not type and not is_library_type(meta):  # attributes it provides
            return (*node, self.class_code(meta))
        return node

    def _abc(self, cls: type) -> tuple:
        """The classes registered on an ABC (``isinstance`` answers by them)."""
        if not isinstance(cls, abc.ABCMeta):
            return ()
        try:
            registry = abc._get_dump(cls)[0]
        except Exception:
            raise NoReuse(f"abc:{qualname(cls)}") from None
        found = [c for r in registry if (c := r()) is not None]
        return ("abc", *sorted((qualname(c), id(c)) for c in found), *map(self.klass, found))

    def class_code(self, t: type) -> tuple:
        """What a user class's instances run: the functions and values its own
        classes (the user-defined ones of its MRO) define, by these rules."""
        out = []
        is_enum = isinstance(t, enum.EnumMeta)
        for k in t.__mro__:
            if k is object or is_library_type(k):
                continue
            for name, attr in vars(k).items():
                if name in CLASS_BOOKKEEPING:
                    continue
                if is_enum and (name in _ENUM_CLASS or isinstance(attr, t)):
                    continue  # Enum's bookkeeping and members (keyed where used)
                out.append((name, self.value(attr)))
        return ("code", *out)

    # -- callables

    def callable(self, f: Any) -> tuple:
        back = self._enter(f)
        if back is not None:
            return back
        t = type(f)
        if t is _FUNCTION:
            return self._function(f)
        if isinstance(f, _PARTIAL):
            d = getattr(f, "__dict__", None)
            return (
                "P",
                self.klass(t),
                self.value(f.func),
                self.value(f.args),
                self.value(f.keywords),
                tuple((k, self.value(x)) for k, x in d.items()) if d else (),
            )
        if t is _METHOD:
            return ("M", self.value(f.__func__), self.value(f.__self__))
        jit = _compat.jit_parts(f)
        if jit is not None:
            fun, ji = jit
            d = getattr(f, "__dict__", None)
            attrs = tuple((k, self.value(x)) for k, x in d.items()) if d else ()
            return ("J", self.value(fun), self.value(_compat.jit_info_key(ji)), attrs)
        if isinstance(f, _compat.CUSTOM_DERIVATIVE_TYPES):
            items = [(k, self.value(x)) for k, x in vars(f).items() if k not in _DOC_ATTRS]
            return ("C", self.klass(t), *items)
        raise NoReuse(f"callable:{qualname(t)}")

    def _function(self, f: types.FunctionType) -> tuple:
        code = f.__code__
        g = f.__globals__
        if type(g) is not dict:
            raise NoReuse(f"globals-not-a-dict:{f.__qualname__}")
        if not is_library(g):
            why, _, writes = code_verdict(code)
            if why is not None:
                raise NoReuse(why)
            for root, target in writes:
                if root == "f":
                    self._free_write(f, target)
        self.pins.append(code)
        self.pins.append(g)
        self.pins.append(f.__builtins__)
        cells = f.__closure__
        d = f.__dict__
        node = (
            "F",
            id(code),
            id(g),
            f.__name__,
            f.__qualname__,
            id(f.__builtins__),  # a function made in a namespace whose builtins changed
            f.__module__ if type(f.__module__) is str else self.value(f.__module__),
            f.__doc__ if type(f.__doc__) is str else self.value(f.__doc__),
            self.value(f.__defaults__),
            self.value(f.__kwdefaults__),
            tuple(self._cell(c) for c in cells) if cells else (),
            tuple((k, self.value(x)) for k, x in d.items()) if d else (),
        )
        self.funcs.append((g, code, f, node))
        return node

    def _free_write(self, f: types.FunctionType, target: tuple) -> None:
        """A write through a free variable (``box.n = 1``, ``log.append(v)``):
        only to a library module or class (taken as fixed), else never reused."""
        try:
            v = f.__closure__[f.__code__.co_freevars.index(target[0])].cell_contents
        except (ValueError, TypeError, IndexError):
            return  # not one of f's own free variables, or unbound
        for attr in target[1:]:
            if not (isinstance(v, types.ModuleType) and is_library_module(v)):
                break
            v = getattr(v, attr, None)
        if isinstance(v, types.ModuleType) and is_library_module(v):
            return
        if isinstance(v, type) and is_library_type(v):
            return
        raise NoReuse(f"writes-attribute:{'.'.join(target)}")

    def _cell(self, c: types.CellType) -> Any:
        try:
            v = c.cell_contents
        except ValueError:  # a cell not yet bound
            return ("empty",)
        return self.value(v)


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


def _float(v: float) -> tuple:
    if v != v:  # a NaN: ``nan in xs`` answers by identity first
        return ("f", _STRUCT_D.pack(v), id(v))
    return ("f", _STRUCT_D.pack(v))


def _complex(v: complex) -> tuple:
    return ("c", _STRUCT_DD.pack(v.real, v.imag))


def _range(v: range) -> tuple:
    return ("r", v.start, v.stop, v.step)


# Exact types with a lossless encoding of their own (no recursion).
_EXACT: dict[type, Any] = {
    type(None): lambda v: ("N",),
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


def _slice(w: Walker, v: slice) -> tuple:
    return ("sl", w.value(v.start), w.value(v.stop), w.value(v.step))


def _weakref(w: Walker, v: weakref.ref) -> tuple:
    target = v()
    return ("W", None if target is None else w.value(target))


def _operator(w: Walker, v: Any) -> tuple:
    made, args = v.__reduce__()[:2]  # methodcaller's keywords are in ``made``
    return ("op", w.ident(type(v)), w.value(made), w.value(args))


def _annotation(w: Walker, a: Any) -> Any:
    try:
        return w.value(a)
    except NoReuse:
        return ("ann", qualname(type(a)), repr(a))  # typing constructs: by their text


def _signature(w: Walker, v: inspect.Signature) -> tuple:
    params = [
        (p.name, int(p.kind), w.value(p.default), _annotation(w, p.annotation))
        for p in v.parameters.values()
    ]
    return ("sig", *params, _annotation(w, v.return_annotation))


def _field(w: Walker, f: dataclasses.Field) -> tuple:
    # what dataclasses.fields() hands to code: name, defaults, metadata, flags; the
    # annotation by its text (annotations are not run)
    def opt(v):
        return ("MISSING",) if v is dataclasses.MISSING else w.value(v)

    return (
        "field",
        f.name,
        opt(f.default),
        opt(f.default_factory),
        w.value(dict(f.metadata)),
        (f.init, f.repr, f.hash, f.compare, f.kw_only),
        repr(f.type),
    )


def _object(w: Walker, v: Any) -> tuple:
    return w.ident(v)  # a bare sentinel: no state


def _ufunc(w: Walker, v: np.ufunc) -> tuple:
    # numpy's own (immutable); np.frompyfunc's wrap a Python function: not keyed
    if getattr(np, v.__name__, None) is not v:
        raise NoReuse(f"value:ufunc:{v.__name__}")
    return w.ident(v)


def _descriptor(w: Walker, v: Any) -> tuple:
    if t := getattr(v, "__objclass__", None):
        if not is_library_type(t):
            raise NoReuse(f"value:{qualname(type(v))}")
    return w.ident(v)


_DISPATCH: dict[type, Any] = {
    list: Walker._container,
    dict: Walker._container,
    set: Walker._container,
    frozenset: Walker._container,
    _FUNCTION: Walker.callable,
    _PARTIAL: Walker.callable,
    _METHOD: Walker.callable,
    np.ndarray: Walker._numpy,
    slice: _slice,
    weakref.ref: _weakref,
    object: _object,
    inspect.Signature: _signature,
    dataclasses.Field: _field,
    np.ufunc: _ufunc,
    staticmethod: lambda w, v: ("SM", w.value(v.__func__)),
    classmethod: lambda w, v: ("CM", w.value(v.__func__)),
    property: lambda w, v: ("PR", w.value(v.fget), w.value(v.fset), w.value(v.fdel)),
    **dict.fromkeys(_OPERATOR_TYPES, _operator),
    **dict.fromkeys(_DESCRIPTORS, _descriptor),
}
if _compat.ArrayImpl is not _compat.Absent:
    _DISPATCH[_compat.ArrayImpl] = Walker._jax_array
    _DISPATCH[_compat.PRNGKeyArray] = Walker._jax_array  # typed keys: a JAX array too
    _DISPATCH[_compat.PjitFunction] = Walker.callable


__all__ = [
    "LIBRARY_VALUES",
    "MAX_NODES",
    "NUMPY_MAX_BYTES",
    "NoReuse",
    "REFLECTIVE",
    "Walker",
    "code_verdict",
    "is_library",
    "is_library_module",
    "is_library_type",
    "qualname",
]
