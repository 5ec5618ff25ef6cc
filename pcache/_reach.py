"""What user code can reach through the library objects its key takes as fixed.

The key walk takes a library module or class by identity (`pcache._walk`), and the
guards follow the attribute chains a function's code reads from its globals
(`pcache._guards`). Neither sees where a library object goes once user code holds
it: ``dc = dataclasses`` in a closure, ``m=mr`` as a default, a global module handed
to a local first, then ``dc.inspect.getmembers(h)`` or ``m.pickle.loads(...)`` reads
state by names computed at trace time (review 25). A library module is not
reflective itself, but one of its attributes may be a module or function that is.

So before a trace is recorded, every library module and class the key holds is
searched for what user code could reach from it, through library modules, classes,
their instances (by attribute) and the containers they hold (every item: a key or an
index may be computed), following only the attribute names that user code can spell:
the names its code objects load (``co_names``) and the identifiers in its string
constants (``getattr(m, "inspect")``, a dotted name). An attribute name computed at
trace time is read only through a reflective built-in or library function, which
the code scan and the walk refuse. A reachable reflective
module, reflective library function or class of a reflective module means the
trace is never reused (``reflection-reach:<path>``).

The search costs one dictionary lookup per (object, name) pair, is bounded
(`MAX_REACHED`), and runs once per recorded trace, never on a hit. A library
module's own ``__getattr__`` (lazy submodules) is followed through ``sys.modules``,
which is where it puts what it imports; a submodule it would import, not loaded yet,
is not judged and refuses (``np.ctypeslib``: review 26).

JAX-free.
"""

from __future__ import annotations

import os
import re
import sys
import types
from typing import Any

from pcache import _memos
from pcache._introspect import Override, cdict, inst_dict, is_a, items, mro, names, plain_module
from pcache._reflection import (
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

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NAMES: dict[int, tuple[types.CodeType, frozenset]] = _memos.memo("reach.names", {})
_MISSING = object()
# Classes of these modules are data (`pcache._walk.Walker.klass` keeps them too).
_PLAIN = frozenset({"builtins", "typing"})
_FUNCS = (types.FunctionType, types.BuiltinFunctionType, types.MethodType)
_CONTAINERS = (list, tuple, set, frozenset)
#: Objects searched from one key's roots at most (else the trace is not recorded).
MAX_REACHED = 20000


def code_names(code: types.CodeType) -> frozenset:
    """Every attribute or global name ``code`` (and the code nested in it) can spell:
    its ``co_names`` and the identifiers of its string constants. Memoized per code
    object (kept alive by the memo)."""
    e = _NAMES.get(id(code))
    if e is not None and e[0] is code:
        return e[1]
    out: set[str] = set()
    stack: list[Any] = [code]
    while stack:
        c = stack.pop()
        if type(c) is types.CodeType:
            out.update(c.co_names)
            stack.extend(c.co_consts)
        elif type(c) is str:
            out.update(_IDENT.findall(c))
        elif type(c) in (tuple, frozenset):
            stack.extend(c)
    got = frozenset(out)
    if len(_NAMES) > 8192:
        _NAMES.clear()
    _NAMES[id(code)] = (code, got)
    return got


def spelled(funcs: list[tuple]) -> frozenset:
    """The names the user functions of a walk (``(globals, code, ...)`` rows) spell."""
    out: set[str] = set()
    for g, code, *_ in funcs:
        if not is_library_code(g, code):
            out |= code_names(code)
    return frozenset(out)


def _fixed(v: Any) -> bool:
    """A library object the key takes by identity and user code may read on from."""
    if plain_module(v):
        return is_library_module(v)
    return is_a(v, type) and is_library_type(v)


def reflective(v: Any) -> str | None:
    """Why reaching ``v`` (a module, class or function) reads state by names held in
    data, else None."""
    if is_a(v, types.ModuleType):
        name = (module_dict(v) or {}).get("__name__")
        return name if type(name) is str and reflective_module(name) else None
    if is_a(v, type):
        mod = names(v)[2]
        if type(mod) is str and mod not in _PLAIN and reflective_module(mod):
            return f"{mod}.{qualname(v)}"
        return None
    if type(v) in _FUNCS or callable(v):  # (a Cython function too: ``np.random.seed``)
        return reflective_callable(v)
    return None


class _Unloaded:
    """A submodule a package's ``__getattr__`` would import: not loaded, not judged."""


_UNLOADED = _Unloaded()
_LISTINGS: dict[str, frozenset] = _memos.memo("reach.listings", {})


def _submodule_file(d: dict, name: str) -> bool:
    """Whether package ``d`` (a module's namespace) has a submodule ``name`` on disk."""
    for p in d.get("__path__", ()) if type(d.get("__path__", ())) is list else ():
        if type(p) is not str:
            continue
        got = _LISTINGS.get(p)
        if got is None:
            try:
                got = frozenset(n.partition(".")[0] for n in os.listdir(p))
            except OSError:
                got = frozenset()
            _LISTINGS[p] = got
        if name in got:
            return True
    return False


def _user(v: Any) -> str | None:
    """A user module or function held by a library object (``rlcompleter.__main__``,
    a hook a library keeps): what it reads from there on is not guarded."""
    if is_a(v, types.ModuleType) and not (plain_module(v) and is_library_module(v)):
        return "user-module"
    if type(v) is types.FunctionType and not is_library_code(v.__globals__, v.__code__):
        return "user-function"
    return None


def _attr(v: Any, name: str) -> Any:
    """``v.name`` as stored, without running code: a module's global (or its
    submodule), a class's attribute by its real MRO, an instance's own attribute or
    its class's."""
    if plain_module(v):
        d = module_dict(v)
        got = d.get(name, _MISSING)
        # (a name the module type has, ``m.__init__``, never reaches ``__getattr__``)
        if got is _MISSING and "__getattr__" in d and not hasattr(types.ModuleType, name):
            got = sys.modules.get(f"{d.get('__name__')}.{name}", _MISSING)
            if got is _MISSING and _submodule_file(d, name):
                got = _UNLOADED  # ``np.ctypeslib`` before numpy imported it: unknown
        return got
    if not is_a(v, type):
        try:
            own = inst_dict(v)
        except Override:  # a class that computes its __dict__: its class only
            own = None
        if own and name in own:
            return own[name]
        v = type(v)
    for k in mro(v):
        d = cdict(k)
        if name in d:
            return d[name]
    return _MISSING


def _children(v: Any, spell: list) -> Any:
    """(name, object) of what code can reach from ``v`` in one step: every item of
    a container (an index or key may be computed), else the attributes it spells."""
    t = type(v)
    if t is dict:
        yield from ((f"[{k!r}]" if type(k) is str else "[]", a) for k, a in items(v))
    elif t in _CONTAINERS:
        yield from (("[]", a) for a in list(v))
    else:
        for name in spell:
            a = _attr(v, name)
            if a is not _MISSING:
                yield name, a


def check(roots: list, spell: frozenset) -> None:
    """Raise `NoReuse` if a name user code spells leads, from one of ``roots``
    (objects the key holds), through library objects and their containers to a
    reflective one. At most `MAX_REACHED` objects are searched, else `NoReuse`."""
    seen: set[int] = set()
    spell = sorted(spell)  # (one path named, the same in every process)
    stack = [(v, _label(v)) for v in roots if _fixed(v)]
    while stack:
        v, path = stack.pop()
        if id(v) in seen:
            continue
        seen.add(id(v))
        if len(seen) > MAX_REACHED:
            raise NoReuse("reflection-reach:too-large")
        for name, a in _children(v, spell):
            if a is None:
                continue
            why = "unloaded-submodule" if a is _UNLOADED else reflective(a) or _user(a)
            if why is not None:
                raise NoReuse(f"reflection-reach:{path}.{name}:{why}")
            if id(a) not in seen and (_fixed(a) or _stateful(a)):
                stack.append((a, f"{path}.{name}"))


def _stateful(a: Any) -> bool:
    """A container, or an instance of a library class with attributes of its own
    (``logging.root``): what it holds is read on like a module's."""
    t = type(a)
    if t is dict or t in _CONTAINERS:
        return True
    if t in _FUNCS or is_a(a, type) or not is_library_type(t):
        return False
    try:
        return bool(inst_dict(a))
    except Override:
        return False


def _label(v: Any) -> str:
    if plain_module(v):
        return str((module_dict(v) or {}).get("__name__"))
    return qualname(v) if is_a(v, type) else qualname(type(v))


__all__ = ["MAX_REACHED", "check", "code_names", "reflective", "spelled"]
