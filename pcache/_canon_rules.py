"""How a primitive lowers, as far as a key can tell: its lowering rules' `RuleKey`.

A rule of JAX's own code is named by its structure (`lowering_rule_key`), one
reaching user code by its objects' identity (process-local); rules made by
`mlir.lower_fun` over code outside JAX are named so the program is keyed by its
lowered module too. Part of the canonical form (`pcache._canon`).
"""

from __future__ import annotations

import builtins
import hashlib
import struct
import sys
import threading
import types
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from pcache import _compat, _dictwatch, _memos
from pcache._canon_memo import local_token, memos_on
from pcache._introspect import cdict, class_ids, fields, is_a, items, names
from pcache._usercode import is_library_code, is_library_type, module_dict


class RuleKey(NamedTuple):
    """How a primitive lowers, as far as a key can tell.

    ``entries``: the registered lowering-rule entries (default, then per platform)
    the verdict was taken on, kept alive so their identities stay theirs.
    ``persistent``: every callable the rules reach is JAX's own code (so the
    primitive's name, JAX's version and ``token`` identify the lowering in any
    process). ``token``: a digest of the rules' structure (which JAX functions,
    partial arguments, closure values) when persistent, else a token unique to these
    rule objects in this process.
    """

    entries: tuple
    persistent: bool
    token: str
    #: ``((fun, multiple_results), ...)``: rules made by `mlir.lower_fun` over
    #: functions outside JAX (equinox's unvmap_any, ...). Such a rule lowers what
    #: tracing ``fun`` gives at lowering time: a program using it is
    #: `JaxprDigest.relower` (keyed by its lowered module too).
    traced: tuple = ()


# Primitive -> RuleKey, revalidated by entry identity on each use
RULE_KEYS: dict = _memos.memo("canon.rule_keys", {})


_JAX_MODULES = ("jax.", "jaxlib.")


def lowering_rule_key(prim) -> RuleKey:
    """The `RuleKey` of ``prim``'s lowering rules as registered now.

    The canonical form names a primitive; its lowering is what the executable is made
    of. A rule reaching user code (a custom primitive, `mlir.lower_fun` over a user
    function, a monkeypatched rule) makes the key process-local and names the rule
    objects; a rule of JAX's own code is named by its structure, so registering
    another JAX rule for a primitive (``register_lowering(sin_p, cos_rule)``) changes
    the key in this process and in the next. Memoized per primitive, revalidated by
    the identity of the registered entries (kept alive by the memo).
    """
    entries = _compat.lowering_entries(prim)
    if memos_on():
        got = RULE_KEYS.get(prim)
        if (
            got is not None
            and len(got.entries) == len(entries)  # a platform may have been added
            and all(a is b for a, b in zip(got.entries, entries, strict=True))
        ):
            return got
    platforms = _compat.lowering_platform_names()
    present = [(p, e) for p, e in zip(platforms, entries, strict=True) if e is not None]
    described = [_describe_rule(e.rule, 0) for _, e in present]
    traced = []
    for i, (_, e) in enumerate(present):
        parts = _compat.lower_fun_parts(e.rule) if described[i] is None else None
        if parts is not None:
            described[i] = f"lower_fun(multiple_results={parts[1]})#{len(traced)}"
            traced.append(parts)
    if None in described:
        # Named by the rule functions' identity (a token never reused in this process).
        token = ";".join(
            f"{p}:{local_token(e.rule)}:{bool(getattr(e, 'inline', False))}" for p, e in present
        )
        key = RuleKey(entries, False, hashlib.sha256(token.encode()).hexdigest()[:32])
    else:
        parts = [
            f"{p}:{d}:{bool(getattr(e, 'inline', False))}"
            for (p, e), d in zip(present, described, strict=True)
        ]
        key = RuleKey(
            entries, True, hashlib.sha256(";".join(parts).encode()).hexdigest()[:32], tuple(traced)
        )
    if memos_on() and baseline_rule(prim, entries):
        if len(RULE_KEYS) > 4096:
            RULE_KEYS.clear()
        RULE_KEYS[prim] = key
    return key


def baseline_rule(prim: Any, entries: tuple) -> bool:
    """Whether every entry is the one its table held when pcache first read it (JAX's
    own: what a rule registered since holds, the program may change in place, a
    partial's keywords included: review 96; such keys are made afresh each time)."""
    tables = _compat.lowering_registries()
    return all(
        e is None or OVERRIDES.first_seen(t).get(prim) is e
        for t, e in zip(tables, entries, strict=True)
    )


_HANDLERS: list = [(), ("", True)]  # the handlers last seen (alive), and their verdict
_HANDLERS_WATCH = _memos.memo("canon.lowering_handlers", _dictwatch.Watch())  # as of `_HANDLERS`
_HANDLERS_LOCK = threading.Lock()


#: Where JAX defines a primitive, None for another's (`pcache._canon_values`, which
#: knows JAX's primitives, sets it when imported; until then no primitive is JAX's)
JAX_PRIMITIVE: list = [lambda p: None]


def _fresh(key: Any) -> bool:
    """Whether a key no table held may be a first registration: any but a class that
    existed when pcache first read the tables (a class made since, by a module
    imported later, met no trace before its handler; ``np.float32`` may have:
    review 94). (An id reused by a class made since counts as existing: an override.)"""
    return not is_a(key, type) or id(key) not in _CLASSES[0]


_CLASSES: list = [frozenset()]  # (ids of the classes alive at the tables' first read)

#: JAX's rule and handler tables as pcache first read them (never forgotten: what an
#: entry held then is the baseline an override is told from). A primitive first met
#: later is a first registration (a JAX module imported later registers the rules of
#: its own new primitives), and so is a class made since (`_fresh`)
OVERRIDES = _dictwatch.Overrides(fresh=_fresh)
_OVERRIDES_KEY: list = [None]  # (`OVERRIDES.version` they were found at, their key)


def overrides_key(jax_primitive_name: Callable[[Any], str | None]) -> tuple[str, bool]:
    """``(token, persistent)`` of every entry of JAX's rule and handler tables that
    differs from what it held when pcache first read the table: a rule or handler
    replaced or removed (JAX's own ``log`` rule registered for ``exp_p``, which the
    ``lower_fun`` rules of other primitives bind while lowering; a batching rule or
    constant handler of another primitive or type: review 92). ``("", True)`` for
    none; a digest naming each (table, key, rule) when all are JAX's own; else a
    token unique to these objects in this process. ``jax_primitive_name``: tells
    JAX's own primitives (`pcache._canon_values`)."""
    with OVERRIDES.lock:  # (what was found and its version, read together)
        if not _CLASSES[0]:
            _CLASSES[0] = class_ids()
        found = OVERRIDES((*_compat.rule_registries(), *_compat.type_handlers()))
        last = _OVERRIDES_KEY[0]
        # (no table written since, and none overridden: an override's rule may hold
        # data the program changes in place, described afresh each time: review 96)
        if last is not None and last[0] == OVERRIDES.version and last[1] == ("", True):
            return last[1]
        version = OVERRIDES.version
        # (a rule registered for one platform where the default table already held one
        # for that primitive takes precedence on that platform: an override too, review 93)
        default = OVERRIDES.first_seen(_compat.lowering_registries()[0])
        shadows = [
            (table, k, v)
            for table in _compat.lowering_registries()[1:]
            for k, v in OVERRIDES.added(table)
            if k in default
        ]
        found_all = [*found, *shadows]
        got = _overrides_key([e for e in found_all if _reaches_others(e[1], jax_primitive_name)])
        _OVERRIDES_KEY[0] = (version, got)
        return got


def overridden(plain: Callable[[Any], bool]) -> list:
    """The primitives with an entry overridden now (`overrides_key`'s), but those
    whose every overriding entry is described by what it is (`_describe_rule`: JAX's
    or an installed library's functions over constants, lineax's ``stop_gradient``
    transpose) and ``plain`` (no user code, no state it reads)."""
    with OVERRIDES.lock:
        found = OVERRIDES((*_compat.rule_registries(), *_compat.type_handlers()))
    out: dict = {}
    for _, k, v in found:
        if isinstance(k, _compat.Primitive):
            fixed = v is not _dictwatch.DELETED and plain(v) and _describe_rule(v, 0, True)
            out[k] = out.get(k, False) or not fixed
    return [k for k, any_open in out.items() if any_open]


def _reaches_others(k: Any, jax_primitive_name: Callable[[Any], str | None]) -> bool:
    """Whether an override of the entry under ``k`` may reach a program that does not
    name it: a rule of one of JAX's own primitives (JAX's rules bind them while
    lowering and transforming others), a handler (for any type), anything else but a
    primitive of the program's (whose rules the keys name where it is bound)."""
    if isinstance(k, _compat.Primitive):
        return jax_primitive_name(k) is not None
    return True


def _overrides_key(found: list) -> tuple[str, bool]:
    if not found:
        return "", True
    descs = []
    for d, k, v in found:
        rule = "deleted" if v is _dictwatch.DELETED else _describe_rule(v, 0, libs=True)
        parts = (_table_name(d), _describe_key(k), rule)
        if None in parts:
            objs = [x for e in found for x in e if x is not _dictwatch.DELETED]
            token = ";".join(local_token(x) for x in objs)
            got = ("local:" + hashlib.sha256(token.encode()).hexdigest()[:32], False)
            break
        descs.append("|".join(parts))
    else:
        got = ("jax:" + hashlib.sha256("\n".join(sorted(descs)).encode()).hexdigest()[:32], True)
    return got


def added() -> list:
    """``(table's name or None, key, value or DELETED)`` of every entry of JAX's
    type-handler tables that differs from what pcache first read there: added under a
    key no table held then (a first registration, in no override's token: the classes
    of a library imported later, `_fresh`), or replaced or removed under a class (an
    override, whose token names the class by its names alone). `pcache._persist_key`
    names them by what the import bound (reviews 159, 160)."""
    with OVERRIDES.lock:
        found = OVERRIDES((*_compat.rule_registries(), *_compat.type_handlers()))
        tables = _compat.type_handlers()
        got = [
            (d, k, v)
            for d in tables
            for k, v in OVERRIDES.added(d)
            if not OVERRIDES.proven(d, k, v)  # (a JAX import's own, unchanged)
        ]
        got += [
            (d, k, v)
            for d, k, v in found
            if is_a(k, type) and any(d is t for t in tables) and k in OVERRIDES.first_seen(d)
        ]
        # (a table's first registration no import is known to have made: a rule the
        # program set for a JAX primitive made since pcache last read the tables, before
        # it read them again, review 160; what a table first met after the program
        # changed it held then, review 164)
        seen = {(id(d), id(k)) for d, k, _ in got}
        got += [
            (d, k, d.get(k, _dictwatch.DELETED))
            for d, k in OVERRIDES.unattested
            if (id(d), id(k)) not in seen and _reaches_others(k, JAX_PRIMITIVE[0])
        ]
    return [(_table_name(d), k, v) for d, k, v in got]


def importing() -> None:
    """A JAX module's import begins (the outermost one running): the tables read, so
    what was registered before it (by the program, or while pcache was off) is no
    first registration `imported` proves (review 163)."""
    if OVERRIDES.version:
        OVERRIDES((*_compat.rule_registries(), *_compat.type_handlers()))


def imported(name: Any, clean: Callable[[], bool]) -> None:
    """JAX's module ``name`` was imported, and no program code ran since the
    outermost JAX import running began (`pcache._snapshots`, which read the tables
    then: `importing`): what the tables hold now that they did not is its
    registrations (a first registration: in no key); one found later may be the
    program's (`added`). ``clean``: asked again after the read (program code run
    inside it, a key's ``__hash__``, takes it back)."""
    if is_jax_module(name) and OVERRIDES.version:
        proved = OVERRIDES.attested((*_compat.rule_registries(), *_compat.type_handlers()))
        if not clean():
            OVERRIDES.unattest(proved)


def describe(k: Any, v: Any) -> tuple[str | None, str | None]:
    """A table entry's key and value (or its removal) as the overrides' token
    describes them."""
    rule = "deleted" if v is _dictwatch.DELETED else _describe_rule(v, 0, True)
    return _describe_key(k), rule


def _table_name(d: dict) -> str | None:
    """A table by where JAX holds it (the same in every process), or None."""
    for platform, table in zip(
        _compat.lowering_platform_names(), _compat.lowering_registries(), strict=True
    ):
        if table is d:
            return f"lowering[{platform}]"
    from pcache._holders import library_holders

    held = [h for h in library_holders(d) if is_jax_module(h[0])]
    return f"{min(held)[0]}.{min(held)[1]}" if held else None


def _found_at(module: str, qualname: str) -> Any:
    """What ``module``'s attribute path ``qualname`` holds (None if nothing)."""
    o: Any = sys.modules.get(module)
    if module_dict(o) is None:
        return None
    for part in qualname.split("."):
        d = module_dict(o) if is_a(o, types.ModuleType) else (cdict(o) if is_a(o, type) else None)
        o = (d or {}).get(part)
    return o


def _describe_key(k: Any) -> str | None:
    """A table's key: a JAX primitive, or a library class (by its module and name)."""
    if is_a(k, type):
        _, qual, mod = names(k)  # (the interpreter's own reads: no metaclass runs)
        if is_library_type(k) and type(mod) is str and type(qual) is str:
            return (
                f"cls:{(mod, qual)!r}"  # (not joined: ``a.b``+``c`` is ``a``+``b.c``, review 160)
            )
        return None
    return _describe_rule(k, 0)


def lowering_handlers_key() -> tuple[str, bool]:
    """``(token, persistent)`` of the handlers lowering makes an aval's MLIR type,
    every literal and constant, and every attribute with (`mlir.ir_type_handlers`,
    `register_constant_handler`, `register_attribute_handler`), as registered now.
    JAX's own (which ones are registered follows from JAX's version and what is
    imported): ``("", True)``. Any other (a program's changes how ``2.0`` or a
    parameter lowers; a library's may be over data): a token unique to these handler
    objects in this process, and the program is keyed by its lowered module too
    (reviews 80, 81). Answered again whenever a table was written (`_dictwatch`)."""
    dicts = _compat.lowering_handlers()
    with _HANDLERS_LOCK:
        if _HANDLERS_WATCH.unchanged(dicts):
            return _HANDLERS[1]
        handlers = [h for d in dicts for _, h in items(d)]
        if any(_describe_rule(h, 0) is None for h in handlers):
            token = ";".join(local_token(h) for h in handlers)
            verdict = ("local:" + hashlib.sha256(token.encode()).hexdigest()[:32], False)
        else:
            verdict = ("", True)
        _HANDLERS[:] = [handlers, verdict]
        return verdict


def is_jax_module(name) -> bool:
    return isinstance(name, str) and (name == "jax" or name.startswith(_JAX_MODULES))


def _describe_function(obj, depth: int, libs: bool) -> str | None:
    """A function of JAX's by what it is (its globals a JAX module's own, its code
    that module file's: never by a ``__module__`` string, review 89), named by its
    code, with its closure values and defaults; an installed library's the same way,
    with the distribution that provides its module and its code by content (lineax
    sets JAX's ``stop_gradient`` transpose rule at import: enabled before that
    import, every program was process-local); else None."""

    g, code = obj.__globals__, obj.__code__
    module = g.get("__name__") if type(g) is dict else None
    if type(module) is not str or not is_library_code(g, code):
        return None
    if obj.__builtins__ is not builtins.__dict__:
        return None
    where = module if is_jax_module(module) else libs and _installed(module, code)
    if not where:
        return None
    items = []
    for cell in obj.__closure__ or ():
        try:
            items.append(_describe_rule(cell.cell_contents, depth + 1, libs))
        except ValueError:  # an empty cell
            items.append("<empty>")
    items += [_describe_rule(v, depth + 1, libs) for v in obj.__defaults__ or ()]
    kwd = obj.__kwdefaults__ or {}
    kws = [(k, _describe_rule(kwd[k], depth + 1, libs)) for k in sorted(kwd)]
    if None in items or any(d is None for _, d in kws):
        return None
    body = ",".join(items) + ";" + ",".join(f"{k}={d}" for k, d in kws)
    # (and by its code's content, constants and names too: two lambdas on one line
    # share a name and a line, and two functions may differ in a constant alone)
    from pcache._persist_code import code_digest
    from pcache._usercode import NoReuse

    try:
        ops = code_digest(code)[:16]
    except NoReuse:
        return None
    return f"fn:{where}:{code.co_qualname}:{code.co_firstlineno}:{ops}({body})"


def _installed(module: str, code: types.CodeType) -> str | None:
    """``module`` (an installed distribution's, not the standard library's nor a
    file the path rule alone calls library) with that distribution's name and
    version and ``code`` by content; None for any other."""
    from pcache._persist_code import code_digest
    from pcache._persist_env import attributed
    from pcache._usercode import NoReuse

    try:
        dist = attributed(module)
        digest = code_digest(code)
    except NoReuse:
        return None
    if dist in ("builtin", "stdlib", "pcache"):
        return None
    return f"lib:{dist}:{digest[:16]}:{module}"


def _describe_rule(obj, depth: int, libs: bool = False) -> str | None:
    """A deterministic description of a lowering rule reaching only JAX's own code
    (functions by module and qualified name, with their closure values, defaults
    and partial arguments), or None if it reaches anything else."""
    import enum
    import functools
    import types

    if depth > 8:
        return None
    t = type(obj)
    if obj is None or any(t is k for k in (bool, int, str, bytes)):
        return repr(obj)
    if t is float or t is complex:  # (by their bits: ``repr`` prints every NaN alike)
        parts = (obj,) if t is float else (obj.real, obj.imag)
        return f"{t.__name__}:" + "".join(struct.pack("<d", v).hex() for v in parts)
    if t is tuple or t is list or t is frozenset:  # (by identity: no metaclass __eq__)
        items = [
            _describe_rule(v, depth + 1, libs)
            for v in (sorted(obj, key=repr) if t is frozenset else obj)
        ]
        return None if None in items else f"{t.__name__}({','.join(items)})"
    if t is dict:
        items = [(repr(k), _describe_rule(v, depth + 1, libs)) for k, v in obj.items()]
        if any(d is None for _, d in items) or not all(type(k) is str for k in obj):
            return None
        return "dict(" + ",".join(f"{k}:{d}" for k, d in sorted(items)) + ")"
    if isinstance(obj, np.dtype) and obj.isbuiltin == 1:  # (numpy's own: by its code)
        return f"dtype:{obj.str}"
    if isinstance(obj, enum.Enum):
        if not (is_jax_module(t.__module__) and is_library_type(t)):
            return None
        return f"enum:{t.__module__}:{t.__qualname__}:{obj.name}"
    if t is functools.partial:  # (exactly: a subclass's call is its own, review 95)
        items = [_describe_rule(v, depth + 1, libs) for v in (obj.func, *obj.args)]
        kws = [(k, _describe_rule(v, depth + 1, libs)) for k, v in sorted(obj.keywords.items())]
        if None in items or any(d is None for _, d in kws):
            return None
        return f"partial({','.join(items)};{','.join(f'{k}={d}' for k, d in kws)})"
    if isinstance(obj, types.FunctionType):
        return _describe_function(obj, depth, libs)
    if isinstance(obj, types.MethodType):
        f, me = (
            _describe_rule(obj.__func__, depth + 1, libs),
            _describe_rule(obj.__self__, depth + 1, libs),
        )
        return None if f is None or me is None else f"method({f};{me})"
    if isinstance(obj, type):
        if not (is_jax_module(obj.__module__) and is_library_type(obj)):
            return None
        return f"cls:{(obj.__module__, obj.__qualname__)!r}"
    if isinstance(obj, (types.BuiltinFunctionType, types.BuiltinMethodType)):
        owner = getattr(obj, "__self__", None)
        if owner is not None and not isinstance(owner, types.ModuleType):
            return None  # a method bound to some object
        return f"builtin:{getattr(obj, '__module__', None)}:{obj.__qualname__}"
    if t is _compat.NB_FUNC:  # jaxlib's C++ (``StringAttr.get``), by the very type
        # (and by where it is found: its names say nothing, review 96)
        mod, name = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
        if not (is_jax_module(mod) and type(name) is str and _found_at(mod, name) is obj):
            return None
        return f"nb:{mod}:{name}"
    if not (is_jax_module(t.__module__) and is_library_type(t)):
        return None
    if isinstance(obj, _compat.Primitive):
        # (one of JAX's own only: a program's primitive bound by a JAX function,
        # ``lower_fun(my_p.bind)``, lowers by the program's rule: review 93)
        return f"prim:{obj.name}" if JAX_PRIMITIVE[0](obj) is not None else None
    return _describe_object(obj, depth, libs)


def _describe_object(obj, depth: int, libs: bool) -> str | None:
    """A JAX object (a config holder, custom_partitioning...): its type and state, only
    where that is all it keeps (not a C++ object's fields, a tuple subclass's items,
    a jit object's callee: review 97)."""
    t = type(obj)
    if fields(obj) is None:
        return None
    state = dict(vars(obj)) if hasattr(obj, "__dict__") else {}
    for klass in t.__mro__:
        for slot in getattr(klass, "__slots__", ()):
            if slot not in ("__weakref__", "__dict__") and hasattr(obj, slot):
                state.setdefault(slot, getattr(obj, slot))
    items = [(k, _describe_rule(v, depth + 1, libs)) for k, v in sorted(state.items())]
    if any(d is None for _, d in items):
        return None
    return f"obj:{t.__module__}:{t.__qualname__}(" + ",".join(f"{k}={d}" for k, d in items) + ")"
