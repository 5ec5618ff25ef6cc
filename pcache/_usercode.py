"""What is user code, and what user code does that a key walk cannot follow.

Trace reuse (`pcache._walk`, `pcache._guards`) keys user code by its state and takes
installed library code as fixed. This module decides which is which, by what code
*is* (a function by its globals being an imported library module's ``__dict__``, a
class by being reachable under its name from one; a ``__module__`` string decides
nothing), and scans a user code object's bytecode once (`code_verdict`) for what
makes a trace depend on more than its key: writes to closure cells it does not own,
globals, module attributes or captured containers, and reads through reflection
(``__globals__``, frames, ``import_module``, dynamic ``getattr``, ...).
"""

from __future__ import annotations

import builtins
import dis
import functools
import importlib.machinery
import os
import site
import sys
import sysconfig
import types
import weakref
from typing import Any

from pcache import _usercode_imports as _imports
from pcache._introspect import (
    Override,
    cdict,
    flags,
    inst_dict,
    is_a,
    items,
    mro,
    names,
    plain_module,
)
from pcache._memos import memo
from pcache._provenance import defined_by, real_path
from pcache._records import recorded
from pcache._reflection import (
    _ATTR_BUILTINS,
    _ATTR_WRITES,
    _CONSTRUCTORS,
    _REFLECTIVE_PARTS,
    _SETTERS,
    FORMATS,
    REFLECTIVE,
    REFLECTIVE_ATTRS,
    REFLECTIVE_BUILTINS,
    UNGUARDABLE,
    format_reaches,
)
from pcache._usercode_imports import _ATTR_OPS, _MUTATORS, _constant_attr_call


class NoReuse(Exception):  # noqa: N818 - a verdict, not an error
    """This call's callable cannot be keyed: it is traced, as without pcache."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def qualname(t: type) -> str:
    if is_a(t, type):
        return names(t)[1]  # (never a metaclass's ``__qualname__`` property)
    return getattr(t, "__qualname__", getattr(t, "__name__", "?"))


# ------------------------------------------------------------ library code

# The interpreter's own library directories: its standard library and the site
# directories `site` set up (a directory merely *named* site-packages on
# ``sys.path`` is not one: its files are library code only as a RECORD lists them,
# `_library_real`; review 61).
_LIB_DIRS = tuple(
    sorted(
        {
            os.path.realpath(p)
            for p in (
                *(
                    sysconfig.get_paths().get(k)
                    for k in ("stdlib", "platstdlib", "purelib", "platlib")
                ),
                *site.getsitepackages(),
                site.getusersitepackages() if site.ENABLE_USER_SITE else None,
            )
            if p
        }
    )
)
_PCACHE_DIR = os.path.dirname(os.path.realpath(__file__))
_LIBRARY: dict[int, tuple[dict, bool]] = {}  # id(globals) -> (globals, verdict)
_LIBRARY_TYPES: dict[int, tuple[weakref.ref, bool]] = {}  # id(type) -> (its ref, verdict)


_FILES: dict[str, bool] = {}  # a file name -> whether it is a library file


def _library_file(file: Any) -> bool:
    if not isinstance(file, str) or not file:
        return False
    if type(file) is not str or not os.path.isabs(file):  # (relative: to the cwd)
        return _library_real(os.path.realpath(file))
    got = _FILES.get(file)
    if got is None:
        if len(_FILES) > 16384:
            _FILES.clear()
        got = _FILES[file] = _library_real(real_path(file))
    return got


def _library_real(real: str) -> bool:
    if real.startswith(_PCACHE_DIR + os.sep):
        return True
    if any(real.startswith(d + os.sep) for d in _LIB_DIRS):
        return True
    # (another site directory, another environment's or one the program made: what
    # an installer put there, as its RECORD says; a loose file is the program's)
    parts = real.split(os.sep)
    for k in range(len(parts) - 2, 0, -1):
        if parts[k] in ("site-packages", "dist-packages"):
            return "/".join(parts[k + 1 :]) in recorded(os.sep.join(parts[: k + 1]))
    return False


def is_library(g: dict) -> bool:
    """Whether a function with globals ``g`` is installed library code: ``g`` is the
    ``__dict__`` of an imported module whose file is library code (a dict that merely
    says ``__name__ = "jax"`` is not), where the import system finds it (a module's
    ``__file__`` is its own to rewrite: review 26)."""
    e = _LIBRARY.get(id(g))
    if e is not None and e[0] is g:
        return e[1]
    name = _str(g.get("__name__"))
    mod = sys.modules.get(name)
    lib = module_dict(mod) is g and _library_file(g.get("__file__")) and _found_at(name, g)
    if len(_LIBRARY) > 4096:
        _LIBRARY.clear()
    _LIBRARY[id(g)] = (g, lib)  # module dicts: kept alive, so the id is never reused
    return lib


def _found_at(name: str, g: dict) -> bool:
    """Whether the import system finds module ``name`` at the file its namespace
    names (a module's ``__file__`` and ``__spec__`` are its own to rewrite; where
    ``sys.path`` leads is not): pcache's own modules at the file their name says,
    or a search of ``sys.path`` (a submodule: of its library package's path) that
    ignores ``sys.modules``."""
    file = real_path(g["__file__"])
    if name == "pcache" or name.startswith("pcache."):  # (an editable install's finder)
        rel = os.path.join(_PCACHE_DIR, *name.split(".")[1:])
        return file in (rel + ".py", os.path.join(rel, "__init__.py"))
    if name == "__main__":
        return False
    spec = _find(name)
    origin = getattr(spec, "origin", None)
    return isinstance(origin, str) and real_path(origin) == file


def _find(name: str) -> Any:
    """The spec the path finder gives module ``name``, a submodule searched in the
    locations the path finder gives its package (not the package's ``__path__``: a
    package the program made may point it at a library's directory: review 45)."""
    parent, _, _ = name.rpartition(".")
    path = None
    if parent:
        path = _SEARCH.get(parent)
        if path is None:
            spec = _find(parent)
            path = _SEARCH[parent] = list(getattr(spec, "submodule_search_locations", None) or ())
        if not path:
            return None
    try:
        return importlib.machinery.PathFinder.find_spec(name, path)
    except Exception:  # (a path hook's own failure: not found where it says)
        return None


_SEARCH: dict[str, list] = memo("usercode.package_search", {})  # package -> locations


_CODE_FILES: dict[tuple, tuple] = {}  # (id(code), id(globals)) -> (code, globals, verdict)


def is_library_code(g: dict, code: types.CodeType) -> bool:
    """Whether a function of globals ``g`` and ``code`` is library code: its globals a
    library module's and its code one that module's file defines, proven by content
    (`pcache._provenance`), not user code given a library module's globals
    (``types.FunctionType(code, os.__dict__)``: review 30) or a library file's name
    (review 44)."""
    if not is_library(g):
        return generated_by(g, code) is not None
    e = _CODE_FILES.get((id(code), id(g)))
    if e is None or e[0] is not code or e[1] is not g:
        e = (code, g, defined_by(g, code, _library_file))
        if len(_CODE_FILES) > 8192:
            _CODE_FILES.clear()
        _CODE_FILES[(id(code), id(g))] = e  # (kept alive: their ids stay their own)
    return e[2]


# id(code) -> (code, globals, (name, object) of every name it loads, the generator)
_GENERATED: dict[int, tuple] = {}  # (a proof, not a memo: the registry is scanned once)
UNBOUND = object()  # (a name `proven_code` saw unbound)


def proven_code(f: types.FunctionType, bound: tuple, generator: str) -> None:
    """Record ``f``'s code as library code that module ``generator`` generated
    (`pcache._generated`), while its namespace binds ``bound``'s names as now."""
    if len(_GENERATED) > 4096:
        _GENERATED.clear()
    _GENERATED[id(f.__code__)] = (f.__code__, f.__globals__, bound, generator)


def generated_by(g: dict, code: types.CodeType) -> str | None:
    """The library module that generated ``code`` with namespace ``g``, proven and
    still bound as it was proven (`proven_code`), or None."""
    e = _GENERATED.get(id(code))
    if e is None or e[0] is not code or e[1] is not g:
        return None
    if any(g.get(n, UNBOUND) is not v for n, v in e[2]):
        return None
    return e[3]


def generated_namespace(g: dict) -> str | None:
    """The library module that generated namespace ``g`` for its ``flatten`` or
    ``unflatten`` (`generated_by`), or None."""
    for n in ("flatten", "unflatten"):
        f = g.get(n)
        if type(f) is types.FunctionType and f.__globals__ is g:
            gen = generated_by(g, f.__code__)
            if gen is not None:
                return gen
    return None


def module_dict(m: Any) -> dict | None:
    """A module's namespace as the interpreter holds it; None for anything else (an
    object whose ``__class__`` or ``__dict__`` says module)."""
    if not is_a(m, types.ModuleType):
        return None
    try:
        return inst_dict(m)
    except Override:
        return None


def is_library_module(m: types.ModuleType) -> bool:
    d = module_dict(m)
    if d is None:
        return False
    name = _str(d.get("__name__"))
    return is_library(d) or (
        # builtin and extension modules (sys, math, jaxlib's): no Python globals
        sys.modules.get(name) is m
        and "__path__" not in d
        and (_no_python(name, d) or _extension_submodule(name, m, d))
    )


def _extension_submodule(name: str, m: types.ModuleType, d: dict) -> bool:
    """A submodule an extension module made (nanobind's ``def_submodule``: jaxlib's
    ``_mlir.ir``): no file of its own, held under its name by its parent, itself a
    library's extension module."""
    parent, _, last = name.rpartition(".")
    pm = sys.modules.get(parent)
    return (
        "__file__" not in d
        and plain_module(pm)
        and (module_dict(pm) or {}).get(last) is m
        and is_library_module(pm)
        and "__file__" in (module_dict(pm) or {})  # (the extension itself: not a package)
    )


def _no_python(name: str, d: dict) -> bool:
    file = d.get("__file__")
    return (
        file is None
        and name in sys.builtin_module_names
        or (type(file) is str and file.endswith((".so", ".pyd")) and _library_file(file))
    )


def is_library_type(t: type) -> bool:
    """Whether class ``t`` is installed library code: reachable under its qualified
    name from the library module it names (builtins included)."""
    # (by the type's identity, checked through a weak reference: a lookup by the type
    # would run a user metaclass's __hash__ and __eq__, which may claim a library's)
    e = _LIBRARY_TYPES.get(id(t))
    if e is not None and e[0]() is t:
        return e[1]
    got = _library_type(t)
    try:
        ref = weakref.ref(t)
    except TypeError:  # not weak-referenceable: not memoized
        return got
    if len(_LIBRARY_TYPES) > 4096:
        _LIBRARY_TYPES.clear()
    _LIBRARY_TYPES[id(t)] = (ref, got)
    return got


_HEAPTYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE: a class made at run time (a class statement)
_IMMUTABLETYPE = 1 << 8  # Py_TPFLAGS_IMMUTABLETYPE: attributes cannot be set on it


def _str(v: Any) -> str:
    return v if type(v) is str else ""


def _library_type(t: type) -> bool:
    # (flags, module and namespaces read as the interpreter holds them: a user
    # metaclass may define ``__flags__``, ``__module__``, ``__mro__``, ``__dict__``)
    if not flags(t) & _HEAPTYPE:
        return True  # a static C type (int, NoneType, numpy's): no user code defines one
    if _compiled(t):
        return True
    qual = qualname(t)
    parts = qual.split(".")
    # A nanobind class may name its full path as its qualname (``jax.Array`` is
    # ``jaxlib._jax.Array``, module ``jax``): reachable under that path.
    reachable = _reachable(t, _str(names(t)[2]), parts) or any(
        _reachable(t, ".".join(parts[:i]), parts[i:]) for i in range(1, len(parts))
    )
    return reachable and _library_methods(t)


def _functions(t: type) -> list:
    out = []
    for v in list(cdict(t).values()):
        if is_a(v, (staticmethod, classmethod)):
            v = v.__func__
        if type(v) is types.FunctionType:
            out.append(v)
    return out


def _library_methods(t: type) -> bool:
    """Whether every function ``t`` defines over a module's globals is library code:
    a class a program stored in a library module, naming it, is not (review 44).
    (Functions over other globals: code a library generated, ``namedtuple``'s.)"""
    for v in _functions(t):
        g = v.__globals__
        if module_dict(sys.modules.get(_str(g.get("__name__")))) is g:
            if not is_library_code(g, v.__code__):
                return False
    return True


def _reachable(t: type, module: str, path: list) -> bool:
    """Whether ``t`` is the object at ``path`` in the library module ``module``
    (else made at run time: ``namedtuple()``, ``type()``, or a user's)."""
    obj: Any = sys.modules.get(module)
    for part in path:  # through library modules and classes only, as stored
        if plain_module(obj) and is_library_module(obj):
            obj = module_dict(obj).get(part)
        elif is_a(obj, type) and obj is not t:
            obj = cdict(obj).get(part)
        else:
            return False  # ``rlcompleter.__main__.C``: a user module on the way
    return obj is t


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
    """A heap type made by an extension module, not by a class statement: immutable
    (``Py_TPFLAGS_IMMUTABLETYPE``, which no class statement can set: its namespace
    and bases can never change, so the verdict, memoized, stays true), its module is
    not an imported Python module, every heap class of its MRO holds only C slots
    and descriptors, and its metaclass is one of these or a static type."""
    if not flags(t) & _IMMUTABLETYPE:
        return False  # (a class statement's, or an extension's that code may change)
    if sys.modules.get(_str(names(t)[2])) is not None:
        return False
    for k in mro(t):
        if flags(k) & _HEAPTYPE and any(
            n in cdict(k) for n in ("__dict__", "__weakref__", "__slots__")
        ):
            return False  # it or a base made by a class statement or type()
    meta = type(t)
    if flags(meta) & _HEAPTYPE and not _compiled(meta):
        return False
    own_c = False
    for k in mro(t):
        if not flags(k) & _HEAPTYPE:
            continue
        for name, a in items(cdict(k)):
            if name in ("__module__", "__doc__", "__qualname__"):
                continue
            if not is_a(a, _C_ATTRS) or _bound_to_data(a):
                return False
            own_c = own_c or k is t
    # An extension's class defines C slots of its own; a class statement's with no
    # body and a module name never imported defines none (a user class: not library).
    return own_c


def _bound_to_data(a: Any) -> bool:
    """A builtin that is not one of a class's own (``__new__`` is bound to its type):
    one bound to an object (``STATE.get``, which reads that object's state) or a
    module's function (``op = operator.add``): what a class statement stores, not
    what an extension's class holds."""
    if type(a) is not types.BuiltinFunctionType:
        return False
    return not is_a(getattr(a, "__self__", None), type)


# ------------------------------------------------------------ code scans

_GLOBAL_OPS = frozenset({"LOAD_GLOBAL", "LOAD_NAME"})
_WRITES = frozenset({"STORE_ATTR", "DELETE_ATTR"})
# Methods that mutate a builtin container (a captured list, dict or set).
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
    call, a store, a return) rather than only being read ("alias": stored in a plain
    local, whose reads are chains of their own). ``("<import>", name)``
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
    why = "writes-argument:out" if _out_keyword(c, ins) else None  # np.add(a, b, out=G)
    sets = _SETTERS if c.co_name in _CONSTRUCTORS else frozenset()  # (`own_setter`)
    alias: dict = {}  # local -> the global chain or imported module it holds (review 57)
    sole = _imports.sole_binding(ins)
    fresh, me = _imports.fresh_locals(c, ins, outer)  # what a write may go through
    i = 0
    while i < n:
        op, arg = ins[i].opname, ins[i].argval
        why = why or _imports.local_write(ins, i, alias, fresh, me, outer)
        if arg in alias and op in ("STORE_FAST", "LOAD_FAST"):
            i, why = _imports.local(ins, i, alias, reads, why)
        if op in ("STORE_GLOBAL", "DELETE_GLOBAL"):
            why = why or f"writes-global:{arg}"
        elif op in ("STORE_DEREF", "DELETE_DEREF") and arg in outer:
            why = why or f"writes-nonlocal:{arg}"
        elif op in _ATTR_OPS and (arg in REFLECTIVE or arg in REFLECTIVE_ATTRS):
            if not (arg in sets and _imports.own_setter(c, ins, i)):
                why = why or f"reflection:{arg}"
        elif op in _ATTR_OPS and arg in FORMATS and (i == 0 or ins[i - 1].opname != "LOAD_CONST"):
            why = why or "reflection:computed-format"  # a format string built or held
        elif op == "IMPORT_NAME":
            why = why or _imports.import_op(ins, i, reads, alias, sole)
        elif op == "IMPORT_FROM" and arg in _IMPORT_REFLECTIVE:
            why = why or f"reflection:import-{arg}"  # from builtins import eval
        elif op == "LOAD_BUILD_CLASS":  # (``class K:`` reads builtins.__build_class__)
            reads[(("__build_class__",), False)] = None
        elif op == "RAISE_VARARGS" and ins[i].arg == 0:
            why = why or "reflection:reraise"  # a bare ``raise``: the caller's exception
        elif op == "LOAD_CONST" and _reflective_const(arg):
            why = why or "reflection:constant"  # getattr(f, "__globals__"), a format
        elif op == "IS_OP":
            # ``s is "SAME"``, ``a is b``: identity, which the key numbers among the
            # values it walks but not against code constants (interned or not).
            test = _singleton_test(ins, i)
            if test is None:
                why = why or "identity-test"
            elif test == "type":  # (and what it compares with: `_guards`, review 214)
                reads[(("<type-is>", ins[i - 1].opname, ins[i - 1].argval), False)] = None
            elif test != "const":  # holds only where `_walk` checks it does
                reads[((f"<{test}-is>",), False)] = None
        if op in _GLOBAL_OPS and arg in _ATTR_WRITES:
            if not (arg in sets and _imports.own_setter(c, ins, i)):
                why = why or f"writes-{arg}"  # setattr(obj, "name", v): a write, named or not
        elif op in _GLOBAL_OPS and arg in _ATTR_BUILTINS and not _constant_attr_call(ins, i):
            why = why or f"dynamic-{arg}"  # getattr(obj, name) with a computed name
        if op in _OUTER_LOADS:
            chain = [arg]
            j = i + 1
            while j < n and ins[j].opname in _ATTR_OPS:
                chain.append(ins[j].argval)
                j += 1
            nxt = ins[j].opname if j < n else "RETURN_VALUE"
            if nxt == "LOAD_CONST" and i and _constant_attr_call(ins, i - 1):
                chain.append(ins[j].argval)  # ``hasattr(m.sub, "name")``: read (review 54)
            for k, attr in enumerate(chain[1:], 1):
                if attr in sets and k == len(chain) - 1 and _imports.own_setter(c, ins, i + k):
                    continue  # ``object.__setattr__(self, ...)`` (not ``type``'s of a class)
                if attr in REFLECTIVE or attr in UNGUARDABLE or attr in REFLECTIVE_ATTRS:
                    why = why or f"reflection:{attr}"
                elif attr in FORMATS:
                    why = why or "reflection:computed-format"  # FMT.format(fn)
            root = "g" if op in _GLOBAL_OPS else "f"
            if op in ("LOAD_DEREF", "LOAD_CLASSDEREF") and arg not in outer:
                root = ""  # one of this call's own cells
            if root and (
                nxt in ("STORE_ATTR", "DELETE_ATTR")
                or (nxt == "COPY" and j + 1 < n and ins[j + 1].opname in _ATTR_OPS)
            ):
                writes[(root + "=", tuple(chain))] = None  # ``m.n = v``, ``m.n += 1``
            elif root and len(chain) > 1 and chain[-1] in _MUTATORS:
                writes[(root, tuple(chain[:-1]))] = None  # ``m.log.append(v)``
            _read(root, chain, ins, j, reads, alias, sole)
            i = j
            continue
        i += 1
    return why


def _read(root: str, chain: list, ins: list, j: int, reads: dict, alias: dict, sole) -> None:
    """Record the chain a global (``root`` "g") or a free variable ("f") starts,
    ``ins[j]`` the instruction after it."""
    nxt = ins[j].opname if j < len(ins) else "RETURN_VALUE"
    if root == "f":  # (a module a cell holds: read as a global's, `_guards`)
        reads[(("<free>", *chain), nxt not in _WRITES)] = None
    elif root == "g":
        # (``m = jax.experimental``: read through m later, as chains of their own)
        held = nxt == "STORE_FAST" and sole(j)
        reads[(tuple(chain), "alias" if held else nxt not in _WRITES)] = None
        if held:
            alias[ins[j].argval] = (j, ("<global>", *chain))


_SINGLETONS = (None, True, False, Ellipsis, NotImplemented)


def _singleton_test(ins: list, i: int) -> str | None:
    """What the ``is`` at ``ins[i]`` provably compares, else None: "const" where one
    side is a singleton constant (``x is None``, ``None is x``: the same object for
    every equal value, so identity says no more than the key's value); "class" for
    ``a.__class__ is b.__class__``; "type" for ``type(a) is B`` with ``B`` a global or
    closure variable (classes, or a value the key numbers: never a code constant).
    A jump landing on the test or inside its operands proves nothing (another path
    may bring another operand); "type" holds only where ``type`` is the builtin and
    "class" only where no user class overrides ``__class__`` (both checked by the
    walk)."""

    def op(j: int) -> tuple[str, Any]:
        return (ins[j].opname, ins[j].argval) if j >= 0 else ("", None)

    def singleton(j: int) -> bool:
        name, value = op(j)
        return name == "LOAD_CONST" and any(value is c for c in _SINGLETONS)

    simple = op(i - 1)[0] in _SIMPLE_LOADS
    if singleton(i - 1):
        kind, start = "const", i - 1
    elif simple and singleton(i - 2):
        kind, start = "const", i - 2
    elif op(i - 1) == op(i - 3) == ("LOAD_ATTR", "__class__") and op(i - 2)[0] in _NAME_LOADS:
        kind, start = "class", i - 4
    elif op(i - 1)[0] in ("LOAD_DEREF", "LOAD_GLOBAL") and _type_call(ins, i - 2):
        kind, start = "type", i - 5
    else:
        return None
    if start < 0 or op(start)[0] not in _NAME_LOADS | {"LOAD_CONST"}:
        return None
    if any(ins[k].is_jump_target for k in range(start, i + 1)):
        return None
    return kind


def _type_call(ins: list, j: int) -> bool:
    """Whether ``ins[j]`` ends ``type(name)`` (3.11: LOAD_GLOBAL type, a name, PRECALL
    1, CALL 1)."""
    return (
        j >= 3
        and ins[j].opname == "CALL"
        and ins[j - 1].opname == "PRECALL"
        and ins[j - 2].opname in _NAME_LOADS
        and ins[j - 3].opname == "LOAD_GLOBAL"
        and ins[j - 3].argval == "type"
    )


_NAME_LOADS = frozenset({"LOAD_FAST", "LOAD_DEREF", "LOAD_GLOBAL", "LOAD_NAME"})
_SIMPLE_LOADS = frozenset({"LOAD_FAST", "LOAD_DEREF", "LOAD_GLOBAL", "LOAD_NAME", "LOAD_CONST"})


_DUNDER_ATTRS = frozenset(a for a in REFLECTIVE_ATTRS if a.startswith("__"))
_IMPORT_REFLECTIVE = REFLECTIVE | REFLECTIVE_ATTRS | REFLECTIVE_BUILTINS


def _out_keyword(c: types.CodeType, ins: list) -> bool:
    """Whether ``c`` passes an ``out=`` keyword: a numpy function or ufunc writes
    that argument, a library-held array among them (review 65)."""
    return any(x.opname == "KW_NAMES" and "out" in c.co_consts[x.arg] for x in ins)


def _reflective_const(c: Any) -> bool:
    if type(c) is bytes:
        c = c.decode("latin-1")
    if type(c) is str:
        if c in REFLECTIVE or c in _DUNDER_ATTRS or any(p in c for p in _REFLECTIVE_PARTS):
            return True  # (``case KeyError(__context__=...)``'s names: review 65)
        return "{" in c and (any(a in c for a in _DUNDER_ATTRS) or format_reaches(c))
    if type(c) in (tuple, frozenset):
        return any(_reflective_const(x) for x in c)
    return False


def plain_partial(obj: Any) -> bool:
    """Whether ``obj`` is a ``functools.partial`` that calls as one: a partial, or an
    instance of a library's subclass whose call is partial's own
    (``jax.tree_util.Partial``). A program's subclass runs the program's code,
    whatever its fields hold (review 95)."""
    t = type(obj)
    return t is functools.partial or (
        is_a(obj, functools.partial)
        and is_library_type(t)
        and next((cdict(k)["__call__"] for k in mro(t) if "__call__" in cdict(k)), None)
        is _PARTIAL_CALL
    )


_PARTIAL_CALL = functools.partial.__dict__["__call__"]


__all__ = [
    "NoReuse",
    "code_verdict",
    "is_library",
    "is_library_code",
    "is_library_module",
    "is_library_type",
    "plain_partial",
    "qualname",
]


_REAL_IMPORT = builtins.__import__


def import_hooked(f: types.FunctionType, reads: tuple) -> bool:
    """Whether ``f``'s code imports through an ``__import__`` other than the
    interpreter's own (its namespace's builtins, or the builtins module, carry a
    hook): the guard of an import reads ``sys.modules``, not what a hook returns."""
    if not any(type(r[0]) is tuple and r[0][:1] == ("<import>",) for r in reads):
        return False
    b = f.__builtins__
    hook = b.get("__import__") if type(b) is dict else getattr(b, "__import__", None)
    return (
        hook is not _REAL_IMPORT
        or builtins.__import__ is not _REAL_IMPORT
        or (type(_REAL_IMPORT) is not types.BuiltinFunctionType)
    )
