"""Trace reuse: a re-created callable is served the trace of the callable it equals.

JAX keys its trace cache on the function object (`pjit._infer_params_cached`, and
`trace_to_jaxpr` under it), so `jax.jit(jax.grad(f))`, a lambda, a
`functools.partial` or a nested def re-created every step is traced again on every
call, even when every later stage hits. pcache extends the sharing JAX already does
between re-created ``jax.jit(f)`` objects of one ``f`` through the wrappers: where a
jit object's call misses JAX's C++ fast path and JAX's own trace cache, the callable
is keyed by what it is built from (`Walker`), and an equal callable's earlier trace
(its `PjitParams`: the closed jaxpr and what dispatch derives from it) is handed to
JAX, which then lowers, compiles and sets up the new object's fast path as for any
trace-cache hit. The new call is never handed to the old callable object.

Two callables are equal when they are built from the same functions with equal
captured values (`Walker`):

* functions: the same code object and globals, equal name, defaults, keyword
  defaults, attributes and closure cells; partials: equal function, arguments and
  keywords; bound methods: equal function and ``__self__``; jit objects: equal
  function and jit options; `custom_jvp`/`custom_vjp`: equal attributes. JAX's own
  wrappers (grad, vmap, checkpoint, ...) are functions whose closures hold the
  wrapped function and the transform's options, so they fall out of these rules.
* captured values: immutable builtins by type and value (floats by their bits);
  tuples, lists, dicts and sets by content (recomputed on every call); JAX arrays,
  modules, classes, enum members and bare sentinels by identity (kept alive by the
  memo); numpy arrays by content up to `NUMPY_MAX_BYTES`; objects with a value
  ``__eq__`` and ``__hash__`` (frozen dataclasses, NamedTuples, shardings, dtypes)
  by value, as JAX compares static arguments. Anything else (a plain mutable
  object, an unhashable or mutable dataclass, a tracer) means no reuse.
* globals (`guards_for`): every name the code of each user function reads with
  ``LOAD_GLOBAL`` (nested code included) is guarded against the value it had before
  the recorded trace: functions by identity and code object (and, transitively,
  the globals their code reads), modules, classes and JAX's callables by identity,
  everything else by value as above. Code of installed libraries (JAX, numpy, the
  standard library, anything under site-packages) is taken as fixed: its globals
  are not guarded. Values reached through attributes of modules or objects are
  taken as JAX's own trace cache takes them: not re-read.
* what JAX's trace cache keys on stays in the key: the jit options (`PjitInfo`, by
  value), the argument signature (static arguments included), the avals, the
  context mesh, and JAX's trace context.

A recorded trace is revalidated on every reuse: its guards, and the content of any
user numpy buffer its jaxpr holds (`_canon.jaxpr_arrays`). Python side effects of
the traced function (a print, a counter) do not happen on a reuse, as on any JAX
trace-cache hit. The memo (`TraceMemo`) is bounded in entries and in the bytes of
the constants its traces hold.
"""

from __future__ import annotations

import builtins
import collections
import dataclasses
import dis
import enum
import functools
import hashlib
import logging
import os
import sys
import sysconfig
import threading
import types
import weakref
from typing import Any

import numpy as np

from pcache import _canon, _compat, _key, _state
from pcache._errors import CheckError, Uncacheable

logger = logging.getLogger("pcache")

#: Captured numpy arrays larger than this are not hashed on every call: no reuse.
NUMPY_MAX_BYTES = 256 * 1024
#: A callable whose key walk meets more objects than this is not reused.
MAX_NODES = 4096
#: Bounds of the trace memo: entries, and bytes. A recorded jaxpr keeps alive what
#: JAX's own caches hold for it (its MeshComputation and executable, keyed on the
#: jaxpr object), so each entry counts `ENTRY_COST` (measured: ~0.75 MB of RSS per
#: small CPU program) plus its constants, against a quarter of the memory tier's
#: bound (`configure`).
MAX_ENTRIES = 1024
ENTRY_COST = 768 * 1024
MAX_BYTES = 256 * 1024**2
#: Distinct miss reasons counted by name (then under "other").
MAX_REASONS = 256

_MISSING: Any = object()


class NoReuse(Exception):  # noqa: N818 - a verdict, not an error
    """This call's callable cannot be keyed: it is traced, as without pcache."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _qualname(t: type) -> str:
    return getattr(t, "__qualname__", getattr(t, "__name__", "?"))


# ------------------------------------------------------------ library code

_STD_DIRS = tuple(
    os.path.realpath(p)
    for p in {sysconfig.get_paths().get(k) for k in ("stdlib", "platstdlib")}
    if p
)
_LIBRARY_PACKAGES = frozenset({"jax", "jaxlib", "numpy", "pcache", "builtins"})
_LIBRARY: dict[int, tuple[dict, bool]] = {}  # id(globals) -> (globals, is library)


_LIBRARY_TYPES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _is_library_type(t: type) -> bool:
    """Whether class ``t`` is defined by installed library code."""
    got = _LIBRARY_TYPES.get(t)
    if got is None:
        mod = sys.modules.get(getattr(t, "__module__", None) or "")
        # A class of a module not imported (made by exec) or of __main__: user code.
        got = mod is not None and t.__module__ != "__main__" and _is_library(mod.__dict__)
        try:
            _LIBRARY_TYPES[t] = got
        except TypeError:  # not weak-referenceable: not memoized
            pass
    return got


def _is_library(g: dict) -> bool:
    """Whether a function with globals ``g`` is installed library code (JAX, numpy,
    the standard library, anything in site-packages): its globals are not guarded."""
    e = _LIBRARY.get(id(g))
    if e is not None and e[0] is g:
        return e[1]
    name = g.get("__name__") or ""
    file = g.get("__file__") or ""
    lib = name.partition(".")[0] in _LIBRARY_PACKAGES
    if not lib and isinstance(file, str) and file:
        real = os.path.realpath(file)
        parts = real.split(os.sep)
        lib = "site-packages" in parts or "dist-packages" in parts
        lib = lib or any(real.startswith(d + os.sep) for d in _STD_DIRS)
    if len(_LIBRARY) > 4096:
        _LIBRARY.clear()
    _LIBRARY[id(g)] = (g, lib)  # module dicts: kept alive, so the id is never reused
    return lib


# ------------------------------------------------------------ the key walk

_BY_VALUE = frozenset({type(None), bool, int, str, bytes, type(...), type(NotImplemented), range})
# Compared by identity: immutable (modules and classes as JAX takes them), or JAX's
# registry singletons (a primitive's rules are looked up by it, not copied).
_IDENTITY_TYPES = (
    types.ModuleType,
    type,
    enum.Enum,
    np.ufunc,
    _compat.Primitive,
    types.WrapperDescriptorType,
    types.MethodDescriptorType,
)
# Builtin functions, and builtin methods bound to an object (``d.get``): by
# identity when bound to a module or nothing, else by what they are bound to.
_BUILTIN = (types.BuiltinFunctionType, types.MethodWrapperType)
_FUNCTION = types.FunctionType
_METHOD = types.MethodType
_PARTIAL = functools.partial
# Attributes of JAX's wrapper objects that describe them but never reach the trace.
_DOC_ATTRS = frozenset({"__doc__", "__annotations__"})
# What every class dict holds besides its own code and values.
_CLASS_BOOKKEEPING = frozenset(
    {
        "__module__",
        "__qualname__",
        "__doc__",
        "__dict__",
        "__weakref__",
        "__annotations__",
        "__slots__",
        "__dataclass_fields__",
        "__dataclass_params__",
        "__match_args__",
        "__orig_bases__",
        "__parameters__",
        "__firstlineno__",
        "__static_attributes__",
        "__abstractmethods__",
        "_abc_impl",  # ABCMeta's subclass cache
    }
)


class Walker:
    """Builds one callable's equality key (nested tuples), from its state now.

    ``pins``: the objects whose ``id()`` the key holds (the memo keeps them alive,
    so an id is never another object's). ``funcs``: (globals, code, function, its
    key) of every Python function met, for the global guards, the mutation check
    (`note_states`) and the reasons of a miss.
    """

    __slots__ = ("pins", "funcs", "seen", "nodes")

    def __init__(self) -> None:
        self.pins: list = []
        self.funcs: list[tuple] = []
        self.seen: dict[int, int] = {}
        self.nodes = 0

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
        self.seen[k] = len(self.seen)  # alive for the walk: its id stays its own
        return None

    def _ident(self, v: Any) -> tuple:
        self.pins.append(v)
        return ("i", id(v))

    def value(self, v: Any) -> Any:
        t = type(v)
        if t in _BY_VALUE:
            return (t, v) if t is not str else v
        if t is float:
            return ("f", v.hex())
        if t is tuple:
            return ("t", *[self.value(x) for x in v])
        if t is complex:
            return ("c", v.real.hex(), v.imag.hex())
        if t is _FUNCTION or t is _PARTIAL or t is _METHOD:
            return self.callable(v)
        if t is list or t is dict or t is set or t is frozenset:
            back = self._enter(v)
            if back is not None:
                return back
            if t is dict:
                return ("d", *[(self.value(k), self.value(x)) for k, x in v.items()])
            if t is list:
                return ("l", *[self.value(x) for x in v])
            # in iteration order: a trace that loops over a set follows it
            return ("s" if t is set else "fs", *[self.value(x) for x in v])
        if t is _compat.ArrayImpl:
            return self._ident(v)
        if isinstance(v, _compat.Tracer):
            raise NoReuse("captured-tracer")
        if t is np.ndarray:
            return self._numpy(v)
        if isinstance(v, np.ndarray):  # a masked array, a matrix: more than its data
            raise NoReuse(f"numpy-subclass:{_qualname(t)}")
        if t is weakref.ref:
            target = v()
            return ("W", None if target is None else self.value(target))
        if isinstance(v, np.generic):
            if v.dtype.hasobject:
                raise NoReuse("numpy-object")
            return ("g", v.dtype.str, v.tobytes())
        if isinstance(v, type) and not _is_library_type(v):
            return self._user_class(v)
        if t is types.ModuleType and not _is_library(v.__dict__):
            # (a global one is guarded with the attributes read from it)
            raise NoReuse(f"captured-user-module:{v.__name__}")
        if isinstance(v, _IDENTITY_TYPES) or t is object:
            return self._ident(v)
        if isinstance(v, _BUILTIN):
            bound = getattr(v, "__self__", None)
            if bound is None or type(bound) is types.ModuleType:
                return self._ident(v)
            return ("B", v.__name__, self._ident(type(bound)), self.value(bound))
        if t is _compat.PjitFunction or isinstance(v, _compat.CUSTOM_DERIVATIVE_TYPES):
            return self.callable(v)
        if isinstance(v, _PARTIAL):  # subclasses (jax.tree_util.Partial)
            return self.callable(v)
        if t is staticmethod or t is classmethod:
            return ("SM" if t is staticmethod else "CM", self.value(v.__func__))
        if t is property:
            return ("PR", self.value(v.fget), self.value(v.fset), self.value(v.fdel))
        user = not _is_library_type(t)
        if isinstance(v, tuple):  # NamedTuples and other tuple subclasses
            back = ("T", self._ident(t), *[self.value(x) for x in v])
            return (*back, self._class_code(t)) if user else back
        params = getattr(t, "__dataclass_params__", None)
        if params is not None:
            if not params.frozen:
                raise NoReuse(f"mutable-dataclass:{_qualname(t)}")
            return self._frozen_dataclass(v, t, user)
        if user:
            # A user class's __eq__ may ignore what the trace reads (a name
            # compared, a payload not): never trusted.
            raise NoReuse(f"mutable:{_qualname(t)}")
        return self._by_eq(v, t)

    def _frozen_dataclass(self, v: Any, t: type, user: bool) -> tuple:
        """Field by field, by these rules (not by its ``__eq__``, which says ``1 ==
        1.0`` and ``0.0 == -0.0``), and, for a user class, with its code."""
        back = self._enter(v)
        if back is not None:
            return back
        fields = getattr(t, "__dataclass_fields__", {})
        items = []
        for name in fields:
            try:
                items.append(self.value(object.__getattribute__(v, name)))
            except AttributeError:
                items.append(("unset",))
        extra = getattr(v, "__dict__", None)
        if extra and set(extra) - set(fields):
            raise NoReuse(f"mutable:{_qualname(t)}")  # attributes set outside its fields
        node = ("D", self._ident(t), *items)
        return (*node, self._class_code(t)) if user else node

    def _user_class(self, cls: type) -> tuple:
        """A user class: itself (by identity), and what it holds now (its methods
        and class attributes, which a trace may read through it)."""
        back = self._enter(cls)
        if back is not None:
            return back
        meta = type(cls)
        if meta is not type and not _is_library_type(meta):  # attributes it provides
            return ("K", self._ident(cls), self._class_code(cls), self._class_code(meta))
        return ("K", self._ident(cls), self._class_code(cls))

    def _class_code(self, t: type) -> tuple:
        """What a user class's instances run: the functions and values its own
        classes (the user-defined ones of its MRO) define, by these rules."""
        out = []
        for klass in t.__mro__:
            if klass is object or _is_library_type(klass):
                continue
            for name, attr in vars(klass).items():
                if name in _CLASS_BOOKKEEPING:
                    continue
                out.append((name, self.value(attr)))
        return ("code", *out)

    def _by_eq(self, v: Any, t: type) -> tuple:
        """A library type's value (shardings, dtypes, tree definitions): by its
        ``__eq__`` and ``__hash__``, as JAX compares static arguments."""
        if t.__hash__ is None:
            raise NoReuse(f"unhashable:{_qualname(t)}")
        if t.__eq__ is object.__eq__:
            raise NoReuse(f"mutable:{_qualname(t)}")
        try:
            hash(v)
        except Exception:
            raise NoReuse(f"unhashable:{_qualname(t)}") from None
        return ("v", self._ident(t), v)

    def _numpy(self, a: np.ndarray) -> tuple:
        if a.dtype.hasobject:
            raise NoReuse("numpy-object")
        if a.nbytes > NUMPY_MAX_BYTES:
            raise NoReuse("numpy-too-large")
        data = np.ascontiguousarray(a).data
        digest = hashlib.blake2b(data, digest_size=16).digest()
        return ("n", type(a), a.dtype.str, a.shape, digest)

    def callable(self, f: Any) -> tuple:
        back = self._enter(f)
        if back is not None:
            return back
        t = type(f)
        if t is _FUNCTION:
            code = f.__code__
            g = f.__globals__
            self.pins.append(code)
            self.pins.append(g)
            cells = f.__closure__
            d = f.__dict__
            node = (
                "F",
                id(code),
                id(g),
                f.__name__,
                f.__qualname__,
                self.value(f.__defaults__),
                self.value(f.__kwdefaults__),
                tuple(self._cell(c) for c in cells) if cells else (),
                tuple((k, self.value(x)) for k, x in d.items()) if d else (),
            )
            self.funcs.append((g, code, f, node))
            return node
        if isinstance(f, _PARTIAL):
            d = getattr(f, "__dict__", None)
            return (
                "P",
                self._ident(t),
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
            return ("J", self.value(fun), self.value(_compat.jit_info_key(ji)))
        if isinstance(f, _compat.CUSTOM_DERIVATIVE_TYPES):
            items = [(k, self.value(x)) for k, x in vars(f).items() if k not in _DOC_ATTRS]
            return ("C", self._ident(t), *items)
        raise NoReuse(f"callable:{_qualname(t)}")

    def _cell(self, c: types.CellType) -> Any:
        try:
            v = c.cell_contents
        except ValueError:  # a cell not yet bound
            return ("empty",)
        return self.value(v)


# ------------------------------------------------------------ global guards

_CODE_GLOBALS: dict[int, tuple[types.CodeType, tuple[str, ...]]] = {}
_GLOBAL_OPS = frozenset({"LOAD_GLOBAL", "LOAD_NAME"})
_ATTR_OPS = frozenset({"LOAD_ATTR", "LOAD_METHOD"})
# What may follow a global's load without the object going anywhere: an attribute
# written (``m.n += 1`` copies it first).
_NO_ESCAPE = frozenset({"COPY", "DUP_TOP", "STORE_ATTR", "DELETE_ATTR"})


def global_names(code: types.CodeType) -> tuple[tuple[str, ...], ...]:
    """What ``code`` (and the code nested in it) reads from its globals: each name
    read with ``LOAD_GLOBAL``, as ``(name,)``, or with the attributes read from it
    right after, as ``(name, attr, ...)`` (``config.lr``; `guards_for` follows them
    through modules)."""
    e = _CODE_GLOBALS.get(id(code))
    if e is not None and e[0] is code:
        return e[1]
    reads: dict[tuple[str, ...], None] = {}
    stack = [code]
    while stack:
        c = stack.pop()
        chain: list[str] | None = None
        for ins in dis.get_instructions(c):
            op = ins.opname
            if op == "IMPORT_NAME":
                reads[("<import>", ins.argval)] = None
            if op in _GLOBAL_OPS:
                if chain:
                    reads[tuple(chain)] = None
                chain = [ins.argval]
            elif chain is not None and op in _ATTR_OPS and len(chain) < 4:
                chain.append(ins.argval)
            else:
                if chain:
                    reads[tuple(chain)] = None
                    if len(chain) == 1 and op not in _NO_ESCAPE:
                        # the object itself handed on (to a call, getattr, a store)
                        reads[("<escape>", chain[0])] = None
                chain = None
        if chain:
            reads[tuple(chain)] = None
        stack.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
    out = tuple(reads)
    if len(_CODE_GLOBALS) > 8192:
        _CODE_GLOBALS.clear()
    _CODE_GLOBALS[id(code)] = (code, out)  # code objects are immutable; kept alive
    return out


# Guard kinds: (kind, namespace, name, expected[, code or key]).
_IS, _FN, _VAL, _ABSENT, _FNV = 0, 1, 2, 3, 4
# Builtins through which code reads or runs what no guard can see.
_UNGUARDABLE = frozenset({"globals", "vars", "locals", "eval", "exec", "__import__"})
# Globals compared by identity: JAX arrays are immutable, the rest are taken as JAX
# takes them (a jit object's trace is cached on its function anyway).
_GLOBAL_IDENTITY = _IDENTITY_TYPES


def _builtins_of(g: dict) -> dict:
    b = g.get("__builtins__", builtins)
    return b if isinstance(b, dict) else b.__dict__


def guards_for(funcs: list[tuple]) -> tuple[list[tuple], list, list[tuple]]:
    """The global guards of a walk's functions: every name their code reads from
    its globals with its value now, transitively through the user functions found
    there, and the attributes read from a user module found there (``config.lr``).
    Returns (guards, objects they pin, the functions walked for them). Raises
    `NoReuse` for a value that cannot be compared."""
    guards: list[tuple] = []
    w = Walker()
    done: set[tuple[int, str]] = set()
    work = [(g, c) for g, c, *_ in funcs if not _is_library(g)]

    def guard(ns: dict, name: str, builtin: bool) -> Any:
        """Guard ``ns[name]``; return its value (`_MISSING` if absent)."""
        v = ns.get(name, _MISSING)
        k = (id(ns), name)
        if k in done:
            return v
        done.add(k)
        if v is _MISSING:
            if not builtin:
                if "__getattr__" in ns and "__name__" in ns:  # a module's computed ones
                    raise NoReuse(f"module-getattr:{name}")
                guards.append((_ABSENT, ns, name, None))
                return v
            b = _builtins_of(ns)
            guards.append((_ABSENT, ns, name, None))
            guards.append((_IS, b, name, b.get(name, _MISSING)))
            return b.get(name, _MISSING)
        t = type(v)
        if t is _FUNCTION and _is_library(v.__globals__):
            guards.append((_FN, ns, name, v, v.__code__))
        elif t is _FUNCTION:
            # A user function: the same object, in the same state (code, closure,
            # defaults, attributes) as when the trace was made, and its globals.
            before = len(w.funcs)
            guards.append((_FNV, ns, name, v, w.value(v)))
            work.extend((fg, fc) for fg, fc, *_ in w.funcs[before:] if not _is_library(fg))
        elif (
            (isinstance(v, _GLOBAL_IDENTITY) and not _user_type(v))
            or t is _compat.ArrayImpl
            or t is _compat.PjitFunction
            or t is object
        ):
            guards.append((_IS, ns, name, v))
        else:
            before = len(w.funcs)
            try:
                guards.append((_VAL, ns, name, w.value(v)))
            except NoReuse as e:
                raise NoReuse(f"global-{e.reason}:{name}") from None
            work.extend((fg, fc) for fg, fc, *_ in w.funcs[before:] if not _is_library(fg))
        return v

    while work:
        g, code = work.pop()
        for chain in global_names(code):
            if chain[0] == "<import>":
                mod = sys.modules.get(chain[1])
                if mod is None or not _is_library(mod.__dict__):
                    # what it reads from the module it imports is not guarded
                    raise NoReuse(f"imports-user-module:{chain[1]}")
                continue
            if chain[0] == "<escape>":
                v = g.get(chain[1], _MISSING)
                if type(v) is types.ModuleType and not _is_library(v.__dict__):
                    # a user module handed on (to getattr, a call): what is read
                    # from it cannot be guarded
                    raise NoReuse(f"user-module-escapes:{chain[1]}")
                continue
            if chain[0] in _UNGUARDABLE and chain[0] not in g:
                raise NoReuse(f"reads-{chain[0]}()")
            v = guard(g, chain[0], builtin=True)
            if len(chain) > 1 and chain[1] == "__dict__" and type(v) is types.ModuleType:
                if not _is_library(v.__dict__):
                    raise NoReuse(f"user-module-escapes:{chain[0]}")
            for attr in chain[1:]:
                # Attributes of a user module are its globals, and those of a user
                # class its own (or a base's): guarded the same way. (Of anything
                # else, and of installed libraries: taken as JAX takes them.)
                if type(v) is types.ModuleType and not _is_library(v.__dict__):
                    v = guard(v.__dict__, attr, builtin=False)
                else:  # (a user class is guarded whole: its methods and attributes)
                    break
    return guards, w.pins, w.funcs


def _user_type(v: Any) -> bool:
    return isinstance(v, type) and not _is_library_type(v)


def failed_guard(guards: list[tuple]) -> str | None:
    """The first global whose value differs from its guard's, else None."""
    for guard in guards:
        kind, g, name, expected = guard[:4]
        if kind == _IS:
            if g.get(name, _MISSING) is not expected:
                return name
        elif kind == _FN:
            v = g.get(name, _MISSING)
            if v is not expected or v.__code__ is not guard[4]:
                return name
        elif kind == _ABSENT:
            if name in g:
                return name
        elif kind == _FNV:
            v = g.get(name, _MISSING)
            try:
                if v is not expected or Walker().value(v) != guard[4]:
                    return name
            except NoReuse:
                return name
        else:
            try:
                if Walker().value(g.get(name, _MISSING)) != expected:
                    return name
            except NoReuse:
                return name
    return None


# ------------------------------------------------------------ mutation

# Function object -> (its key, weak references to what its ids name) when a miss
# last walked it. JAX's identity-keyed trace
# caches (jit's, checkpoint's, the control-flow bodies', custom_jvp's) keep a trace
# of a function object for as long as it lives, whatever happens to its closure
# cells, defaults or attributes since: stock JAX serves that trace to every
# callable built on that object. A trace that consumed one must not be recorded
# for a new object whose state merely equals the old object's new state.
_FN_STATE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_MUTATED: weakref.WeakSet = weakref.WeakSet()
_STATE_LOCK = threading.Lock()


def note_states(funcs: list[tuple]) -> str | None:
    """Remember each walked function's state; return the name of one whose state
    changed since it was last walked (now or before), else None. (Each is keyed on
    its own: a node taken inside a larger walk numbers its back-references by that
    walk.) The objects a state names by id are held weakly (a strong hold could
    keep the function itself alive: a method's class holds the method); one that
    died is one the function no longer holds, so its state changed."""
    found = None
    done: set[int] = set()
    with _STATE_LOCK:
        for _, _, f, _ in funcs:
            if id(f) in done:
                continue
            done.add(id(f))
            if f in _MUTATED:
                found = found or f.__qualname__
                continue
            w = Walker()
            try:
                node = w.callable(f)
            except (NoReuse, RecursionError):
                continue
            seen = _FN_STATE.get(f)
            if seen is not None and (seen[0] != node or any(r() is None for r in seen[1])):
                _MUTATED.add(f)
                found = found or f.__qualname__
            _FN_STATE[f] = (node, _weak_refs(w.pins))
    return found


def _weak_refs(objs: list) -> tuple:
    out = []
    for o in objs:
        try:
            out.append(weakref.ref(o))
        except TypeError:  # dicts (a function's globals, held by the function itself)
            pass
    return tuple(out)


# ------------------------------------------------------------ the memo


@dataclasses.dataclass
class Recorded:
    """One reusable trace and what it was made from."""

    params: Any  # JAX's PjitParams
    guards: list[tuple]
    arrays: tuple  # the jaxpr's user numpy buffers, with snapshots (_canon.jaxpr_arrays)
    pins: list  # objects whose ids are in the key or the guards
    callable_key: tuple
    rest: tuple
    codes: dict[int, types.CodeType]  # id -> code, to name what changed on a miss
    nbytes: int

    def stale(self) -> str | None:
        """Why this trace no longer fits its key (a global or a buffer changed)."""
        if self.arrays and not _canon.same_contents(self.arrays):
            return "constant-changed"
        name = failed_guard(self.guards)
        return None if name is None else f"global-changed:{name}"


class TraceMemo:
    """Callable key -> `Recorded`, LRU, bounded in entries and constant bytes; plus,
    per function skeleton (the code objects a walk met), the last key recorded,
    to say what changed on a miss."""

    def __init__(self, max_entries: int = MAX_ENTRIES, max_bytes: int = MAX_BYTES):
        self.max_entries, self.max_bytes = max_entries, max_bytes
        self._d: collections.OrderedDict[Any, Recorded] = collections.OrderedDict()
        # skeleton -> (callable key, rest, codes) of the last trace recorded for it
        self._last: collections.OrderedDict[Any, tuple] = collections.OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        # skeletons whose globals changed since a trace of them: never recorded again
        self._refused: collections.OrderedDict[Any, None] = collections.OrderedDict()

    def never_record(self, skeleton) -> None:
        with self._lock:
            self._refused[skeleton] = None
            while len(self._refused) > self.max_entries:
                self._refused.popitem(last=False)

    def recording_refused(self, skeleton) -> bool:
        return skeleton in self._refused

    def get(self, key) -> Recorded | None:
        with self._lock:
            rec = self._d.get(key)
            if rec is not None:
                self._d.move_to_end(key)
            return rec

    def last(self, skeleton) -> tuple | None:
        with self._lock:
            return self._last.get(skeleton)

    def put(self, key, skeleton, rec: Recorded) -> bool:
        if rec.nbytes > self.max_bytes // 4:
            return False
        with self._lock:
            old = self._d.pop(key, None)
            if old is not None:
                self._bytes -= old.nbytes
            self._d[key] = rec
            self._bytes += rec.nbytes
            self._last[skeleton] = (rec.callable_key, rec.rest, rec.codes)
            self._last.move_to_end(skeleton)
            while len(self._d) > self.max_entries or self._bytes > self.max_bytes:
                _, dropped = self._d.popitem(last=False)
                self._bytes -= dropped.nbytes
            while len(self._last) > self.max_entries:
                self._last.popitem(last=False)
        return True

    def clear(self) -> None:
        with self._lock:
            self._d.clear()
            self._last.clear()
            self._refused.clear()
            self._bytes = 0

    def configure(self, memory_bytes: int) -> None:
        """Bound the memo by a quarter of the memory tier's bound."""
        with self._lock:
            self.max_bytes = max(4 * ENTRY_COST, min(memory_bytes // 4, 1 << 40))

    def __len__(self) -> int:
        return len(self._d)

    @property
    def bytes(self) -> int:
        return self._bytes


MEMO = TraceMemo()


def _after_fork_in_child() -> None:
    # A fork while another thread held one of these would leave the child waiting
    # forever on a lock nobody will release.
    global _STATE_LOCK
    MEMO._lock = threading.Lock()
    _STATE_LOCK = threading.Lock()


os.register_at_fork(after_in_child=_after_fork_in_child)
#: The jaxprs of recorded traces (weakly): a reuse hands JAX this very object, whose
#: lowering JAX's own `_pjit_lower` cache holds (`_jit_seam.pjit_lower_wrapper`).
RECORDED: weakref.WeakSet = weakref.WeakSet()


# ------------------------------------------------------------ why a miss


def _first_difference(a: Any, b: Any, codes: dict, where: str) -> str | None:
    """What differs between two callable keys, named for the user (None: equal)."""
    if a == b:
        return None
    if not (isinstance(a, tuple) and isinstance(b, tuple) and a and b and a[0] == b[0]):
        return f"value-changed:{where}" if where else "value-changed"
    tag = a[0]
    if tag == "F":
        code = codes.get(a[1])
        name = a[4]
        if a[1] != b[1]:
            return f"code-changed:{name}"
        if a[2] != b[2]:
            return f"globals-changed:{name}"
        if a[5] != b[5] or a[6] != b[6]:
            return f"default-changed:{name}"
        if a[7] != b[7]:
            free = code.co_freevars if code is not None else ()
            for i, (x, y) in enumerate(zip(a[7], b[7], strict=False)):
                if x != y:
                    cell = free[i] if i < len(free) else str(i)
                    inner = _first_difference(x, y, codes, f"{name}.{cell}")
                    if inner is None or inner.startswith("value-changed"):
                        return f"closure-changed:{name}.{cell}"
                    return inner
        return f"attribute-changed:{name}"
    if tag == "P":
        if a[2] != b[2]:
            return _first_difference(a[2], b[2], codes, "partial.func") or "partial-changed"
        if a[3] != b[3]:
            return "partial-arg-changed"
        return "partial-keyword-changed"
    if tag == "M":
        if a[1] != b[1]:
            return _first_difference(a[1], b[1], codes, "method") or "method-changed"
        return "self-changed"
    if tag == "J":
        if a[1] != b[1]:
            return _first_difference(a[1], b[1], codes, where) or "jit-changed"
        return "jit-options-changed"
    return f"value-changed:{where}" if where else "value-changed"


def miss_reason(last: tuple | None, callable_key: tuple, rest: tuple) -> str:
    """Why a call missed, against the last trace recorded for the same functions
    (`TraceMemo.last`)."""
    if last is None:
        return "first-trace"
    last_key, last_rest, codes = last
    why = _first_difference(last_key, callable_key, codes, "")
    if why is not None:
        return why
    names = ("jit-options", "signature", "avals", "mesh", "trace-context")
    for name, x, y in zip(names, last_rest, rest, strict=True):
        if x != y:
            return f"{name}-changed"
    return "evicted"


# ------------------------------------------------------------ the seam


class _Recorder:
    """Stands in for JAX's `InferParamsCacheEntry` on a miss: `_infer_params` reads
    ``pjit_params`` (None: it traces) and then sets it, which fills JAX's own entry
    and records the trace for equal callables."""

    __slots__ = ("_entry", "_record")

    def __init__(self, entry: Any, record: Any) -> None:
        self._entry = entry
        self._record = record

    @property
    def pjit_params(self) -> Any:
        return None

    @pjit_params.setter
    def pjit_params(self, p: Any) -> None:
        self._entry.pjit_params = p
        self._record(p)


def infer_params_cached_wrapper(fun, jit_info, signature, in_avals, ctx_mesh):
    """JAX's `_infer_params_cached`, where JAX's own entry is empty and trace reuse
    is on: serve an equal callable's trace, or record this one's."""
    entry = _state.ORIG["infer_params"](fun, jit_info, signature, in_avals, ctx_mesh)
    rt = _state.rt
    if rt is None or not rt.trace_reuse or entry.pjit_params is not None:
        return entry
    try:
        return _reuse(rt, entry, fun, jit_info, signature, in_avals, ctx_mesh)
    except CheckError:
        raise
    except Exception as exc:  # never the user's program: trace as without pcache
        rt.error("trace reuse", exc)
        return entry


def _reuse(rt, entry, fun, jit_info, signature, in_avals, ctx_mesh):
    blocked = _compat.trace_reuse_blocked()
    if blocked is not None:
        return _missed(rt, entry, fun, blocked)
    w = Walker()
    try:
        ck = w.value(fun)
        rest = (
            _compat.jit_info_key(jit_info),
            signature,
            in_avals,
            ctx_mesh,
            # JAX's trace context, and the settings tracing reads that it leaves out
            # (jax_default_prng_impl, jax_enable_checks, debug_nans, ...)
            (_compat.trace_context(), _key.extra_config_values()),
        )
        key = (ck, rest)
        hash(key)
    except NoReuse as e:
        # Its functions may be traced by JAX's identity caches now: their state
        # from here on is what a later recording is compared with.
        note_states(w.funcs)
        return _missed(rt, entry, fun, e.reason)
    except TypeError:
        note_states(w.funcs)
        return _missed(rt, entry, fun, "unhashable-key")
    except RecursionError:
        return _missed(rt, entry, fun, "too-deep")
    try:
        rec = MEMO.get(key)  # (compares library values with their __eq__)
    except Exception:
        return _missed(rt, entry, fun, "uncomparable-key")
    why = None
    if rec is not None:
        why = rec.stale()
        if why is None:
            if rt.check_mode:  # trace anyway, and compare
                return _Recorder(entry, lambda p: _checked(rt, rec, p))
            entry.pjit_params = rec.params
            rt.stats.trace_hit()
            return entry
    skeleton = (tuple(id(c) for _, c, *_ in w.funcs), rest[0])
    why = why or miss_reason(MEMO.last(skeleton), ck, rest)
    # May this call's trace serve equal callables later? Not where JAX's own
    # identity-keyed trace caches might hand this trace an older state of one of
    # the functions (one whose state changed since pcache last saw it, or one
    # whose globals changed): that trace must not reach a new, equal callable.
    if why.startswith("global-changed:"):
        MEMO.never_record(skeleton)
    try:
        guards, guard_pins, guard_funcs = guards_for(w.funcs)
    except NoReuse as e:
        note_states(w.funcs)
        return _missed(rt, entry, fun, e.reason)  # why it can never be reused
    _count_miss(rt, fun, why)
    mutated = note_states(w.funcs + guard_funcs)
    if mutated is not None or MEMO.recording_refused(skeleton):
        return entry
    codes = {id(c): c for _, c, *_ in w.funcs}
    pins = w.pins + guard_pins

    def record(p) -> None:
        try:
            _record(rt, key, skeleton, p, guards, pins, ck, rest, codes)
        except Exception as exc:
            rt.error("trace reuse", exc)

    return _Recorder(entry, record)


def _record(rt, key, skeleton, p, guards, pins, ck, rest, codes) -> None:
    if _compat.unreusable_params(p) is not None:
        return
    jaxpr = p.params["jaxpr"]
    callbacks, late = _canon.late_code(jaxpr)
    if callbacks or any(_user_code(c) for c in late):
        # Python this callable's objects run after the trace (host callbacks at
        # run time, a custom_vjp's bwd when differentiated): its side effects and
        # reads are this callable's own, so another callable must trace its own.
        return
    try:
        arrays = _canon.jaxpr_arrays(jaxpr)
    except Uncacheable:
        return  # its buffers cannot be snapshotted: not reused
    if arrays is None:
        return
    nbytes = ENTRY_COST + _compat.const_bytes(jaxpr)
    if MEMO.put(key, skeleton, Recorded(p, guards, arrays, pins, ck, rest, codes, nbytes)):
        RECORDED.add(jaxpr)


def _user_code(obj: Any, depth: int = 0, seen: set | None = None) -> bool:
    """Whether calling ``obj`` may run user code (anything but installed library
    code), looking through closures, partials and JAX's wrapped functions."""
    if depth > 8:
        return True
    seen = set() if seen is None else seen
    if id(obj) in seen:
        return False
    seen.add(id(obj))
    t = type(obj)
    if t is _FUNCTION:
        if not _is_library(obj.__globals__):
            return True
        inner = [c.cell_contents for c in obj.__closure__ or () if _bound(c)]
        inner += list(obj.__defaults__ or ())
    elif isinstance(obj, _PARTIAL):
        inner = [obj.func, *obj.args, *obj.keywords.values()]
    elif t is _METHOD:
        inner = [obj.__func__, obj.__self__]
    elif t is tuple or t is list:
        inner = list(obj)
    elif t is dict:
        inner = list(obj.values())
    elif hasattr(obj, "f_transformed") and hasattr(obj, "f"):  # JAX's WrappedFun
        inner = [obj.f, obj.f_transformed]
    elif t is _compat.PjitFunction:
        inner = [obj._fun]
    elif isinstance(obj, _compat.CUSTOM_DERIVATIVE_TYPES):
        inner = list(vars(obj).values())
    elif callable(obj) and not isinstance(obj, (type, *_IDENTITY_TYPES, *_BUILTIN)):
        return not _is_library_type(t)
    else:
        return False  # data
    return any(_user_code(x, depth + 1, seen) for x in inner)


def _bound(cell: types.CellType) -> bool:
    try:
        cell.cell_contents  # noqa: B018
    except ValueError:
        return False
    return True


def _checked(rt, rec: Recorded, p) -> None:
    try:
        _check(rt, rec, p)
    except CheckError:
        raise
    except Exception as exc:
        rt.error("trace reuse", exc)


def _check(rt, rec: Recorded, p) -> None:
    """Check mode: the trace a reuse would have served must equal a fresh one."""
    old, new = rec.params, p
    same = (
        _canon.jaxpr_digest(old.params["jaxpr"]) == _canon.jaxpr_digest(new.params["jaxpr"])
        and old.in_tree == new.in_tree
        and old.out_tree == new.out_tree
        and old.in_avals == new.in_avals
        and {k: v for k, v in old.params.items() if k != "jaxpr"}
        == {k: v for k, v in new.params.items() if k != "jaxpr"}
    )
    if not same:
        raise CheckError(
            "pcache: trace reuse would have served a different trace for "
            f"{new.params.get('name')!r} (a false hit): the callable's key misses what changed"
        )
    rt.stats.trace_hit()


def _missed(rt, entry, fun, reason: str):
    _count_miss(rt, fun, reason)
    return entry


def _count_miss(rt, fun, reason: str) -> None:
    """A traced call, by why it was not served a recorded trace."""
    rt.stats.trace_miss(reason, MAX_REASONS)
    if rt.explain:
        name = getattr(fun, "__qualname__", None) or type(fun).__name__
        if rt._first(f"explain-trace:{name}:{reason}"):
            logger.warning("pcache: trace of %s not reused (%s)", name, reason)
    elif logger.isEnabledFor(logging.DEBUG):
        logger.debug("pcache: trace not reused (%s)", reason)


def clear() -> None:
    """Forget the recorded traces (a new runtime, `pcache.clear_memory`)."""
    MEMO.clear()


def forget_states() -> None:
    """After `jax.clear_caches()`: JAX holds no trace of any function any more."""
    MEMO.clear()
    with _STATE_LOCK:
        _FN_STATE.clear()
        _MUTATED.clear()


__all__ = [
    "MEMO",
    "NoReuse",
    "Recorded",
    "TraceMemo",
    "Walker",
    "clear",
    "forget_states",
    "note_states",
    "global_names",
    "guards_for",
    "infer_params_cached_wrapper",
]
