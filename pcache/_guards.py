"""What a recorded trace depends on outside the callable: globals and registries.

A callable's key (`pcache._walk`) covers what it holds. A trace also reads module
state (a global, an attribute of a user module, a function found there) and runs
code JAX finds in its registries (a user pytree node's flatten/unflatten, a user
primitive's JVP, batching, transpose, abstract-evaluation and lowering rules). This
module makes both part of what a reuse checks, and fails closed where it cannot:

* globals (`guards_for`): every chain a user function's code reads from its
  globals (``name``, ``name.attr.attr``, nested code included) is guarded against
  the value it had when the trace was recorded, through user modules attribute by
  attribute, transitively through the user functions found there. A user module
  whose object escapes (handed to a call such as ``getattr``, returned, stored) or
  is of a ``ModuleType`` subclass, an import of a user module, a global that is a
  module's computed ``__getattr__``, the builtins that read namespaces (``globals``,
  ``vars``, ``locals``, ``eval``, ``exec``, ``__import__``) and reflection (found by
  the code scan) mean no reuse. Library modules' and objects' attributes are fixed.
* registries (`registry_key`): the rules of every user primitive (a primitive any
  of whose registered rules reaches user code) and the flatten/unflatten functions
  and class of every user pytree node type are walked into every key, so their
  state and their globals are compared like the callable's own. A registry that
  grew is scanned again; a rule registered again for a user primitive is a new key.
  (Replacing a rule of one of JAX's own primitives is monkeypatching: not seen.)
"""

from __future__ import annotations

import builtins
import operator
import sys
import threading
import types
from typing import Any

from pcache import _canon, _canon_rules, _compat, _dictwatch, _reach
from pcache._generated import prove_nodes
from pcache._introspect import (
    is_a,
    items,
    names,
    plain_module,
    unwatched,
)
from pcache._memos import collector_paused, memo
from pcache._module_reads import data_descriptor, escapes, static_chain
from pcache._reflection import (
    IDENTITY_BUILTINS,
    UNGUARDABLE,
    reflective_module,
)
from pcache._rule_state import holds_program_data, holds_state
from pcache._user_callables import user_code
from pcache._usercode import (
    NoReuse,
    code_verdict,
    is_library,
    is_library_code,
    is_library_module,
    is_library_type,
    module_dict,
    qualname,
)
from pcache._walk import Walker, plain_array

_MISSING: Any = object()
# Python's own builtins as at pcache's import (one put there later: a global), and theirs.
_PY_BUILTINS = dict(vars(builtins))

# Guard kinds: (kind, namespace, name, expected[, code]); TYPE: (TYPE, object, None, type).
IS, FN, VAL, ABSENT, TYPE, ALIASES, PLAIN, NAMES, LIBATTR = 0, 1, 2, 3, 4, 5, 7, 8, 9
# PLAIN: (PLAIN, a JAX array, None, None): it holds no attribute of the program's.
# LIBATTR: as IS, for what the program reads from a library module (``lib.CURRENT``).


def _builtins_of(g: dict) -> dict:
    b = g.get("__builtins__", builtins)
    return b if type(b) is dict else (module_dict(b) or {})


def _user_module(v: Any) -> bool:
    return is_a(v, types.ModuleType) and not is_library_module(v)


class _Guarding:
    """One `guards_for` run: the guards, and the walker their values were keyed by."""

    def __init__(self, callable_walk: Walker | None = None, walker: type = Walker) -> None:
        self.guards: list[tuple] = []
        self.w = walker()
        self.callable_walk = callable_walk
        # One walker for every value guard, in order, as `failed_guard` walks them
        # again: objects shared between globals are back-references (CFG is DEFAULT).
        self.vw = walker()
        self.done: set[tuple[int, str]] = set()
        self.work: list[tuple[dict, types.CodeType, Any]] = []  # (and the function)
        self.imports: list = []  # what functions' ``import`` statements take

    def more(self, before: int) -> None:
        for fg, fc, f, *_ in self.w.funcs[before:]:
            if not is_library_code(fg, fc):
                if f.__builtins__ is not _builtins_of(fg):
                    raise NoReuse(f"builtins-not-its-globals:{f.__qualname__}")
                self.work.append((fg, fc, f))

    def guard(self, ns: dict, name: str, builtin: bool) -> Any:
        """Guard ``ns[name]``; return its value (`_MISSING` if absent)."""
        v = ns.get(name, _MISSING)
        k = (id(ns), name)
        if k in self.done:
            return v
        self.done.add(k)
        guards = self.guards
        if v is _MISSING:
            if not builtin:
                if "__getattr__" in ns and "__name__" in ns:  # a module's computed ones
                    raise NoReuse(f"module-getattr:{name}")
                guards.append((ABSENT, ns, name, None))
                guards.append((ABSENT, ns, "__getattr__", None))  # not added later
                return v
            b = _builtins_of(ns)
            guards.append((ABSENT, ns, name, None))
            bv = b.get(name, _MISSING)
            if bv is _MISSING or _PY_BUILTINS.get(name, _MISSING) is bv:
                guards.append((IS, b, name, bv))  # Python's own builtin
            else:  # a value someone put in builtins: guarded as a global
                return self.guard(b, name, builtin=False)
            return bv
        t = type(v)
        if v is operator.attrgetter or v is operator.methodcaller:
            raise NoReuse(f"reflective-attrgetter:{name}")  # a name computed, then read
        # (kinds by the real type: an object whose ``__class__`` says module is not
        # one; `pcache._introspect`)
        mname = str((module_dict(v) or {}).get("__name__"))
        if is_a(v, types.ModuleType) and reflective_module(mname):
            if sys.modules.get(mname) is v:
                raise NoReuse(f"reflection-module:{mname}")
        if is_a(v, type) and is_library_type(v):
            mod = names(v)[2]
            if type(mod) is str and reflective_module(mod) and mod != "typing":
                raise NoReuse(f"reflection-module:{mod}.{qualname(v)}")  # its methods
        if (
            (is_a(v, types.ModuleType) and is_library_module(v))
            or t is _compat.ArrayImpl  # immutable; its liveness is checked
            or t is object
        ):
            # (a jit object is a value: walked, function and all, not trusted to JAX's
            # identity caches, which can drop its trace: review 82)
            if t is _compat.ArrayImpl and not plain_array(v):  # review 65
                raise NoReuse(f"array-attributes:{name}")
            if t is _compat.ArrayImpl:
                self.w.arrays.append(v)
                guards.append((PLAIN, v, None, None))
            guards.append((IS, ns, name, v))
        elif is_a(v, types.ModuleType):
            if not plain_module(v):
                raise NoReuse(f"module-subclass:{name}")
            guards.append((IS, ns, name, v))  # its attributes are guarded as read
            guards.append((TYPE, v, None, types.ModuleType))  # no __class__ swapped in
        else:
            # Keyed by a walker of its own, as `failed_guard` keys it again (a shared
            # walker would number what it met before as back-references).
            w = self.vw
            mark = (len(w.pins), len(w.arrays), len(w.funcs), len(w.bodies), len(w.keep))
            try:
                enc = w.value(v)
            except NoReuse as e:
                raise NoReuse(f"global-{e.reason}:{name}") from None
            guards.append((VAL, ns, name, enc))
            before = len(self.w.funcs)
            self.w.pins += w.pins[mark[0] :]
            self.w.arrays += w.arrays[mark[1] :]
            self.w.funcs += w.funcs[mark[2] :]
            # (what JAX may hold traces of: their states noted, `_trace.note_states`)
            self.w.bodies += w.bodies[mark[3] :]
            self.w.keep += w.keep[mark[4] :]
            self.more(before)
        return v

    def imported(self, name: str, froms: tuple) -> None:
        """``import name`` / ``from name import *froms`` in a function's code: only
        library modules that read no state by name, and what is taken from them
        judged as a value reached from a library object is (`pcache._reach`). Each
        module is guarded in ``sys.modules`` (which the import reads) and by its names
        (``hasattr(m, "tool")``: review 55); across processes, named (review 56)."""
        for part in [name, *_prefixes(name)[:-1]]:  # (the module itself named first)
            mod = sys.modules.get(part)
            if mod is None or _user_module(mod):
                # what it reads from the module it imports is not guarded
                raise NoReuse(f"imports-user-module:{part}")
            if reflective_module(part):
                raise NoReuse(f"reflection-module:{part}")
            self.imports.append(mod)
            self._imported_module(sys.modules, part, mod)
        mod = sys.modules[name]
        for n in froms:
            d = module_dict(mod)
            if n not in d and "__getattr__" in d:  # (what ``IMPORT_FROM`` asks before it
                raise NoReuse(f"import-from-getattr:{name}.{n}")  # falls back: review 206)
            v = d.get(n, sys.modules.get(f"{name}.{n}"))
            if v is None or _user_module(v):
                raise NoReuse(f"imports-user-module:{name}.{n}")
            why = _reach.reflective(v)
            if why is not None:
                raise NoReuse(f"reflection-import:{name}.{n}:{why}")
            self.imports.append(v)
            ns, key = (d, n) if n in d else (sys.modules, f"{name}.{n}")
            if n not in d and (id(d), "__getattr__") not in self.done:
                self.done.add((id(d), "__getattr__"))
                self.guards.append((ABSENT, d, "__getattr__", None))
            self._imported_module(ns, key, v)

    def _imported_module(self, ns: dict, name: str, v: Any) -> None:
        if (id(ns), name) not in self.done:
            self.done.add((id(ns), name))
            self.guards.append((IS, ns, name, v))
            if is_a(v, types.ModuleType):
                if not plain_module(v):
                    raise NoReuse(f"module-subclass:{name}")
                self.guards.append((NAMES, module_dict(v), None, tuple(module_dict(v))))
                if self.vw.content:
                    self.vw.ident(v)

    def free(self, f: Any, chain: tuple, escaped: Any) -> None:
        """A chain read from a free variable of ``f`` (``("<free>", name, *attrs)``):
        where its cell holds a library module (``import jax.numpy as jnp`` in an
        enclosing function), read on as from a global's (review 206); any other value
        is walked with ``f``."""
        try:
            cell = f.__closure__[f.__code__.co_freevars.index(chain[1])]
            v = cell.cell_contents
        except (ValueError, TypeError, IndexError, AttributeError):
            return  # (not ``f``'s own free variable, or an empty cell)
        if plain_module(v) and is_library_module(v):
            escapes(_library_chain(v, chain[2:], self), chain, escaped)
        elif static_chain(v, chain[2:])[0]:  # (``H.m.K``: reviews 207, 208; what the
            # cell holds is walked: a module in it refused there, `captured-module`)
            raise NoReuse(f"module-held:{'.'.join(chain[1:])}")

    def chain(self, g: dict, chain: tuple, escaped: bool, hashing: bool = False) -> None:
        if chain[0] == "<type-is>":  # ``type(a) is B`` compares classes if ``type`` is
            if g.get("type", _builtins_of(g).get("type")) is not type:  # the builtin
                raise NoReuse("identity-test:type")
            return
        if chain[0] == "<class-is>":  # `Walker.klass` refuses ``__class__`` overrides
            return
        if chain[0] == "<import>":
            self.imported(chain[1], chain[2:])
            return
        if chain[0] == "<imported>":  # read through a local an import bound (review 57)
            top, *path = chain[1].split(".")
            mod = sys.modules.get(top)  # (a user module's import refused already)
            if mod is None:
                return None
            # (``import a.b as c`` binds what ``a``'s attribute ``b`` holds, as
            # ``IMPORT_FROM`` reads it, not ``sys.modules["a.b"]``: review 205)
            v = mod
            for attr in path:
                d = module_dict(v)
                if d is None or attr not in d:  # (the import falls back to sys.modules)
                    raise NoReuse(f"import-as-unbound:{chain[1]}")
                v = d[attr]
                if _user_module(v):
                    raise NoReuse(f"imports-user-module:{chain[1]}")
            return escapes(_library_chain(mod, (*path, *chain[2:]), self), chain, escaped)
        if chain[0] == "<from>":  # (``from a import b``: what ``sys.modules["a"]`` holds
            mod = sys.modules.get(chain[1])  # as ``b``, guarded by `imported`)
            if chain[2] not in (module_dict(mod) or {}):
                raise NoReuse(f"import-from-unbound:{chain[1]}.{chain[2]}")
            return escapes(_library_chain(mod, chain[2:], self), chain, escaped)
        # (a ``__hash__`` may hash, never take an id: ``id(v) == id(1000)``)
        identity = chain[0] in IDENTITY_BUILTINS and not (hashing and chain[0] == "hash")
        if (chain[0] in UNGUARDABLE or identity) and chain[0] not in g:
            raise NoReuse(f"reads-{chain[0]}()")
        v = self.guard(g, chain[0], builtin=True)
        for i, attr in enumerate(chain[1:], 1):
            # Attributes of a user module are its globals: guarded the same way; of a
            # jit object, what was set on it (``JF.scale``). Of anything else: a user
            # class or value is guarded whole (its walk), a library object taken as
            # fixed.
            if type(v) is _compat.PjitFunction:
                d = getattr(v, "__dict__", None)
                if d is None or data_descriptor(type(v).__dict__.get(attr)):
                    return  # what jit objects compute: library code
                # (else its instance dict first: ``g.__doc__`` set on it, a method
                # shadowed by an attribute; absent: guarded absent: review 43)
                v = self.guard(d, attr, builtin=False)
                continue
            if not _user_module(v):
                return escapes(_library_chain(v, chain[i:], self), chain, escaped)
            v = self.guard(module_dict(v), attr, builtin=False)
        if escaped and _user_module(v):
            # handed on (to getattr, a call, a return): what is read from it later
            # cannot be guarded
            raise NoReuse(f"user-module-escapes:{chain[-1]}")
        escapes(v, chain, escaped)


def _module_type_test(g: dict, chain: tuple, f: Any = None, code: Any = None) -> None:
    """``type(a) is B`` where ``B`` may be a module's class: refused, as a recording
    watches modules through a subclass of their class (`pcache._module_watch`: ``a``
    a module, the test would differ while recorded, review 214). ``B`` a global, a
    builtin, or a free variable of function ``f`` running ``code`` (a frozen
    dataclass's ``type(self) is cls``); else unknown: refused."""
    _, op, name = chain
    b = _MISSING
    if op == "LOAD_GLOBAL":
        b = g.get(name, _builtins_of(g).get(name, _MISSING))
    elif f is not None and f.__code__ is code and name in code.co_freevars:
        try:
            b = f.__closure__[code.co_freevars.index(name)].cell_contents
        except (TypeError, IndexError, ValueError):  # (an empty cell: unknown)
            b = _MISSING
    if b is _MISSING or (is_a(b, type) and issubclass(b, types.ModuleType)):
        raise NoReuse("module-type-test")


def _prefixes(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[: i + 1]) for i in range(len(parts))]


def _library_chain(v: Any, attrs: tuple, run: _Guarding) -> Any:
    """A chain read on through library modules (``logging.config.X``): refused where
    it reaches a module that reads state by names held in data; what it ends at
    (None where it stops short: a name absent, an object that is no module). Each module it
    reaches is guarded by identity (its namespace is then checked after a trace:
    `library_spaces`); across processes (``content``) it is named (a submodule must
    be attributed to its distribution as its package is: review 38)."""
    for attr in attrs:
        d = module_dict(v)
        if d is None:  # (an object: what it holds is described with it, but a module)
            held, end = static_chain(v, attrs[attrs.index(attr) :])
            if held:  # (``lib.CONFIG.np.K``: reviews 206-208)
                raise NoReuse(f"module-held:{attr}")
            return end
        if attr not in d:  # (a submodule not imported yet: ``hasattr(jax.experimental,
            if (id(d), attr) not in run.done:  # "sparse")``, review 54)
                run.done.add((id(d), attr))
                run.guards.append((ABSENT, d, attr, None))
                _library_getattr(d, run)
            return None
        v = d.get(attr)
        if is_a(v, types.ModuleType):
            if (id(d), attr) not in run.done:
                run.done.add((id(d), attr))
                run.guards.append((IS, d, attr, v))
            if run.vw.content:
                run.vw.ident(v)
        elif (id(d), attr) not in run.done:  # (a library module's value the program reads
            # itself: the very object, as the trace saw it; across processes, with what
            # it is and its module's names for it, `_persist_key`: review 178)
            run.done.add((id(d), attr))
            run.guards.append((LIBATTR, d, attr, v))
        name = (module_dict(v) or {}).get("__name__")
        if type(name) is str and reflective_module(name):
            raise NoReuse(f"reflection-module:{name}")
    return v


def _library_getattr(d: dict, run: _Guarding) -> None:
    """What answers a name a library module lacks: its ``__getattr__`` (the very
    function; across processes, what it is: one rebound by a computed name before
    pcache started is another function, review 203), or its having none."""
    if (id(d), "__getattr__") in run.done:
        return
    run.done.add((id(d), "__getattr__"))
    if "__getattr__" in d:
        run.guards.append((LIBATTR, d, "__getattr__", d["__getattr__"]))
    else:
        run.guards.append((ABSENT, d, "__getattr__", None))


def aliases(callable_walk: Walker | tuple | None, w: Walker) -> tuple:
    """Which objects a global's walk met that the callable's walk met too (by their
    numbers in each): ``opts is DEFAULT``, a dict keyed by the very function the
    callable holds. Equal content is not the same object. ``callable_walk``: a walk,
    or a tuple of walks (the callable's and its registry rules': a rule's default
    that is a global dict's key, review 40), each compared with ``w``."""
    if callable_walk is None:
        return ()
    if type(callable_walk) is tuple:
        return tuple(aliases(cw, w) for cw in callable_walk)
    seen = callable_walk.seen
    return tuple(sorted((seen[k], n) for k, n in w.seen.items() if k in seen))


def guards_for(funcs: list[tuple], callable_walk: Walker | None = None, more_roots: list = (),
               walker: type = Walker, reach: bool = True) -> tuple:  # fmt: skip
    """The global guards of a walk's functions, and the walker that keyed their
    values (its pins, arrays and functions belong to the guards). Raises `NoReuse`
    for a read that cannot be guarded, or (``reach``: a trace to record) for a
    reflective object user code can reach from a library object it holds
    (`pcache._reach`; ``more_roots``: what other walks of the call pinned).
    ``callable_walk``: the walk of the callable, whose objects' identity with the
    globals' is guarded too (`aliases`). ``walker``: the kind of walk
    (`pcache._persist_key.ContentWalker` for a key without ids)."""
    run = _Guarding(callable_walk, walker)
    for g, _c, f, *_ in funcs:
        if not is_library_code(g, f.__code__) and f.__builtins__ is not _builtins_of(g):
            # (exec'd with other builtins than its namespace now names: the guards
            # read the namespace's)
            raise NoReuse(f"builtins-not-its-globals:{f.__qualname__}")
    run.work = [(g, c, f) for g, c, f, *_ in funcs if not is_library_code(g, c)]
    while run.work:
        g, code, f = run.work.pop()
        why, reads, writes = code_verdict(code)
        if why is not None:
            raise NoReuse(why)
        # (a ``__hash__`` that hashes its fields, as a dataclass's does, hands the
        # result only to dicts and sets, whose contents and order are keyed)
        hashing = code.co_name == "__hash__" and "." in code.co_qualname  # (a class's)
        for chain, escaped in reads:
            if chain[0] == "<free>":
                run.free(f, chain, escaped)
            else:
                if chain[0] == "<type-is>":
                    _module_type_test(g, chain, f, code)
                run.chain(g, chain, escaped, hashing)
        for root, target in writes:
            if root[0] == "g":
                _global_write(g, target, store=root == "g=")
    # what user code may reach from the library objects all of it holds (review 25)
    roots = [v for kind, _, _, v in run.guards if kind == IS] + run.imports
    walks = callable_walk if type(callable_walk) is tuple else (callable_walk,)
    roots += run.w.pins + [p for cw in walks if cw is not None for p in cw.pins]
    roots += list(more_roots)
    if reach:
        _reach.check(roots, _reach.spelled(funcs + run.w.funcs))
    # which objects the globals share with the callable: one guard, checked last
    run.guards.append((ALIASES, None, None, aliases(callable_walk, run.vw)))
    return run.guards, run.w


def _global_write(g: dict, target: tuple, store: bool = False) -> None:
    """A write to an attribute of, or a container method called on, what a global
    chain names: only a library module or class (taken as fixed) may be the target,
    anything else is state a reuse would not update."""
    v = g.get(target[0], _MISSING)
    if v is _MISSING:
        v = _builtins_of(g).get(target[0], _MISSING)
    for attr in target[1:]:
        d = module_dict(v)
        if d is None:
            break
        v = d.get(attr, _MISSING)
    if is_a(v, types.ModuleType) and is_library_module(v) and not store:
        return  # ``np.append(a, b)``: a library function, named like a mutator
    # (a class's: unbound, ``dict.update(np.sctypeDict, d)`` writes its argument: review 59)
    raise NoReuse(f"writes-attribute:{'.'.join(target)}")


def read_state(f: types.FunctionType, w: Walker) -> tuple:
    """The values of the globals ``f``'s own code reads (chains through user
    modules), keyed by ``w`` (an identity where a value has no key)."""
    g = f.__globals__
    if is_library_code(g, f.__code__):
        return ()
    out = []
    for chain, _ in code_verdict(f.__code__)[1]:
        if chain[0].startswith("<"):  # an import, a marker
            continue
        v = g.get(chain[0], _MISSING)
        if v is _MISSING:
            v = _builtins_of(g).get(chain[0], _MISSING)
        for attr in chain[1:]:
            if not _user_module(v):
                break
            v = module_dict(v).get(attr, _MISSING)
        try:
            out.append(w.value(v) if v is not _MISSING else ("absent",))
        except NoReuse:
            out.append(("id", id(v)))
    return tuple(out)


def failed_guard(guards: list[tuple], callable_walk: Walker | None = None) -> str | None:
    """The first global whose value differs from its guard's, else None; with
    ``callable_walk`` (this call's walk of its callable), also one whose objects are
    no longer, or newly, the callable's own (`aliases`)."""
    vw = Walker()  # the value guards' one walker, as `_Guarding.vw`
    for guard in guards:
        kind, g, name, expected = guard[:4]
        if kind == IS or kind == LIBATTR:
            if g.get(name, _MISSING) is not expected:
                return name
        elif kind == TYPE:  # (a module's watching class is its own: another thread records)
            if unwatched(type(g)) is not expected:
                return getattr(g, "__name__", "?")
        elif kind == FN:
            v = g.get(name, _MISSING)
            if v is not expected or v.__code__ is not guard[4]:
                return name
        elif kind == ABSENT:
            if name in g:
                return name
        elif kind == PLAIN:
            if not plain_array(g):
                return "<array attributes>"
        elif kind == NAMES:  # (the same names, in order: nothing bound or deleted)
            if len(g) != len(expected) or not all(map(operator.is_, g, expected)):
                return f"<names of {g.get('__name__')}>"
        elif kind == ALIASES:
            # (the last guard: every value guard has been walked by ``vw``)
            if callable_walk is not None and aliases(callable_walk, vw) != expected:
                return "<shared objects>"
        else:
            try:
                if vw.value(g.get(name, _MISSING)) != expected:
                    return name
            except NoReuse:
                return name
    return None


# ------------------------------------------------------------ registries


class _Registries:
    """What JAX's rule, handler and pytree tables hold, as of their last write
    (`_tables`): the user primitives and node types, whether a handler is the
    program's, the overrides' token, and an epoch counting the writes."""

    epoch: int = 0
    prims: tuple = ()
    nodes: tuple = ()
    handler: bool = False
    overrides: str = ""


def namespaces(funcs: list[tuple]) -> tuple:
    """(namespace, its keys, its values) of every user module a walk's functions
    live in (a trace is recorded only if they are the same after it: `same_space`)."""
    spaces = {id(g): g for g, *_ in funcs if not is_library(g)}
    return tuple((g, tuple(g), tuple(g.values())) for g in spaces.values())


def library_spaces(guards: list[tuple]) -> tuple:
    """`namespaces` of every library module a trace's code reads from (its identity
    guards): a trace that binds or rebinds one's globals, through an alias the code
    scan cannot follow (``m = M; m.CNT = ...``: review 39), is not recorded."""
    spaces = {}
    for guard in guards:
        if guard[0] == IS and is_a(guard[3], types.ModuleType):
            d = module_dict(guard[3])
            if d is not None:
                spaces[id(d)] = d
    return tuple((g, tuple(g), tuple(g.values())) for g in spaces.values())


def same_space(g: dict, keys: tuple, values: tuple) -> bool:
    """Whether module namespace ``g`` still holds exactly ``keys`` and ``values`` (by
    identity, in order): nothing was bound, rebound or deleted."""
    return (
        len(g) == len(keys)
        and all(map(operator.is_, g, keys))
        and all(map(operator.is_, g.values(), values))
    )


_REG = _Registries()
#: JAX's rule, handler and pytree tables as of `_REG`'s last scan (one watch: a hit
#: reads their version tags once)
_TABLES_WATCH = memo("guards.tables", _dictwatch.Watch())
_TABLES_LOCK = threading.RLock()  # (the watch and what it vouches for)
_ALL_TABLES: list = [None]  # ((rules, handlers, pytrees), all their dicts in one tuple)
_VERDICTS: dict[int, tuple] = memo("guards.rule_verdicts", {})  # id(rule) -> (rule, verdicts)


def _verdict(rule: Any) -> tuple[bool, bool]:
    """(`user_code`, `holds_state`: only asked when not user code) of a registered
    rule, memoized by the rule's identity (a registry's change is found by identity
    too: `_dictwatch`), so a rule registered while a program warms up costs a scan
    of that rule, not of all."""
    e = _VERDICTS.get(id(rule))
    if e is None or e[0] is not rule:
        if len(_VERDICTS) > 16384:
            _VERDICTS.clear()
        user = user_code(rule)
        e = _VERDICTS[id(rule)] = (rule, user, user or holds_state(rule))  # (kept alive)
    return e[1], e[2]


def _data(rule: Any) -> bool:
    """`holds_program_data`, memoized with `_verdict`'s (asked of rules holding state)."""
    e = _VERDICTS[id(rule)]
    if len(e) == 3:
        e = _VERDICTS[id(rule)] = (*e, holds_program_data(rule))
    return e[3]


def _scan_registries(regs: tuple, tree: dict) -> None:
    prims: dict = {}
    for d in regs:
        for p, rule in items(d):
            if not isinstance(p, _compat.Primitive) or p in prims:
                continue
            user, state = _verdict(rule)
            if user or (state and (_canon.jax_primitive_name(p) is None or _data(rule))):
                # a user's rule, or library code over data someone can change
                # (``lower_fun(partial(jnp.multiply, FACT))`` for a user primitive,
                # or registered on one of JAX's: review 80)
                prims[p] = None
    for d in regs:
        for p in list(d):
            if isinstance(p, _compat.Primitive) and p not in prims:
                lib = _canon.jax_primitive_name(p) is None  # (a library's, or a user's)
                # (its impl or abstract eval: user code, or for a library's primitive
                # library code over data someone can change: review 120)
                if any(u or (st and lib) for u, st in map(_verdict, _compat.primitive_rules(p))):
                    prims[p] = None
    prove_nodes(tree)  # (equinox's generated flatten and unflatten: library code)
    nodes = [
        t
        for t, entry in items(tree)
        # a user's node, or one over user code or state (``FLAT.get`` of a user dict
        # registered for ``range``: review 34)
        if not is_library_type(t) or any(user_code(f) or holds_state(f) for f in entry)
    ]
    _REG.prims, _REG.nodes = tuple(prims), tuple(nodes)


def tables() -> tuple[tuple, dict, tuple, tuple, int, str, bool]:
    """``(rule tables, pytree registry, user primitives, user node types, epoch,
    overrides' token, user handler)``, scanned again whenever any table was written
    (`_dictwatch`: a rule registered again, even a library primitive's, is a change
    and a new epoch, so a new key for every trace)."""
    regs, handlers, tree = tables = _compat.rule_tables()
    with _TABLES_LOCK:
        last = _ALL_TABLES[0]
        if last is None or not all(map(operator.is_, last[0], tables)):
            last = _ALL_TABLES[0] = (tables, (*regs, *handlers, tree))
        if not _TABLES_WATCH.unchanged(last[1]):  # (the same tuple: one identity test)
            with collector_paused():  # (verdicts of every rule: thousands of them)
                _scan_registries(regs, tree)  # (a write meanwhile: scanned again next call)
            _REG.handler = _user_handler(handlers)
            # (a rule or handler replaced, JAX's own of another primitive or type
            # included: it may run where the jaxpr does not name it, review 92)
            _REG.overrides = _canon_rules.overrides_key(_canon.jax_primitive_name)[0]
            # (an overridden primitive's rules are walked like a user primitive's: they
            # may hold data the program changes in place, review 96; not one whose
            # overriding rules are described whole, in the overrides' token)
            over = _canon_rules.overridden(lambda r: _verdict(r) == (False, False))
            _REG.prims += tuple(p for p in over if p not in _REG.prims)
            _REG.epoch += 1
        return regs, tree, _REG.prims, _REG.nodes, _REG.epoch, _REG.overrides, _REG.handler


def _user_handler(dicts: tuple) -> bool:
    return any(
        (is_a(k, type) and not is_library_type(k)) or user_code(h) or holds_program_data(h)
        for d in dicts
        for k, h in items(d)
    )


def user_type_handler(tabs: tuple | None = None) -> bool:
    """Whether a handler is registered for a type of the program's, or a handler of
    the program's for any type (its aval, a zero, its MLIR type, a constant or
    attribute of it, how it is batched or canonicalized: `_compat.type_handlers`):
    JAX runs it while tracing and lowering, over whatever it reads, and JAX's
    lowering caches hold a served trace's lowering by the jaxpr's identity (a
    constant handler changing how ``2.0`` lowers: reviews 80, 81). Answered again
    whenever a table was written (`_dictwatch`)."""
    return (tabs or tables())[-1]


def user_primitives(prims: dict) -> bool:
    """Whether any of ``prims`` (by id) is a user primitive (`_scan_registries`)."""
    return any(id(p) in prims for p in _REG.prims)


def registry_key(w: Walker, tabs: tuple | None = None) -> tuple:
    """The state of every user rule and user pytree node JAX may run while tracing,
    keyed by ``w`` (so their globals are guarded with the callable's)."""
    w.registry = True  # (rules JAX made: `register_pytree_node_class`'s methodcaller)
    regs, tree, prims, nodes, epoch, overrides, _ = tabs or tables()
    if overrides:  # (described afresh: what an override's rule holds may change in place)
        overrides = _canon_rules.overrides_key(_canon.jax_primitive_name)[0]
    out: list = [epoch, ("overrides", overrides)]
    try:
        for p in prims:
            rules = [w.value(d.get(p)) for d in regs]
            rules += [w.value(r) for r in _compat.primitive_rules(p)]
            out.append(("prim", w.ident(p), *rules))
        for t in nodes:
            entry = tree.get(t)
            out.append(("node", w.klass(t), *(w.value(f) for f in entry or ())))
    except NoReuse as e:
        raise NoReuse(f"registry-{e.reason}") from None
    return tuple(out)


__all__ = ["failed_guard", "guards_for", "registry_key"]
