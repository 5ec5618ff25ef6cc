"""What a persisted key holds of process-wide registrations that no walk of the
call meets (`pcache._persist_key`): classes registered on ABCs, and the rules JAX's
tables hold for installed libraries' primitives."""

from __future__ import annotations

import abc
import operator
import sys
from collections.abc import Callable

from pcache import _memos
from pcache._introspect import is_a, names
from pcache._usercode import NoReuse, is_library_type

_MEMO: dict = _memos.memo("persist.abcs", {})  # "abcs" -> (ABCMeta's token, digest)


def abc_registrations(named: Callable, digest: Callable) -> str:
    """The digest of every class registered on an ABC (``Set.register(range)``), by
    name: across processes ABCMeta's counter (in the host state of the in-process
    key) only tells how many registrations were made, not which (review 42); it is
    not in this key. Memoized per counter value.

    Left out: an installed distribution's class registered on a library's or the
    standard library's ABC. Libraries make those at import (scipy registers its
    Cython arrays as ``Sequence``), and when a library is imported varies between
    processes: a served trace skips a lowering that imports scipy, the preload
    thread imports it while deserializing. Keyed, they made every later call of a
    new process miss. A program making one itself changes a library's state, as
    monkeypatching does (documented). ``named``, ``digest``: the persisted key's
    (`pcache._persist_key`)."""
    token = abc.get_cache_token()
    e = _MEMO.get("abcs")
    if e is not None and e[0] == token:
        return e[1]
    out = []
    seen: set[int] = set()
    todo: list = [object]
    while todo:
        k = todo.pop()
        if id(k) in seen:
            continue
        seen.add(id(k))
        try:
            todo.extend(type.__subclasses__(k))
        except TypeError:
            continue
        if issubclass(type(k), abc.ABCMeta):  # (its real type)
            try:
                registered = [c for r in abc._get_dump(k)[0] if (c := r()) is not None]
            except TypeError:
                raise NoReuse("persist-abc-unreadable") from None
            if not is_library_type(k):  # (a user ABC: every registration)
                keep = registered
            else:
                keep = [c for c in registered if not _third_party(c)]
            if keep:
                out.append((_abc_name(k, named), tuple(sorted(_abc_name(c, named) for c in keep))))
    enc = digest(("abcs", tuple(sorted(out))))
    _MEMO["abcs"] = (token, enc)
    return enc


def _third_party(c: type) -> bool:
    """Whether class ``c`` is an installed distribution's (not the standard
    library's, a builtin, pcache's or user code)."""
    mod = names(c)[2]
    top = mod.partition(".")[0] if type(mod) is str else ""
    if not top or top in sys.stdlib_module_names or top in ("builtins", "pcache"):
        return False
    return is_library_type(c)


def _abc_name(c: type, named: Callable) -> tuple:
    try:
        return named(c)
    except NoReuse:
        if is_library_type(c):  # (a library's own registration at import: its version)
            return ("library-class", *map(str, names(c)))
        raise


def library_rules(named: Callable, digest: Callable, walker: Callable) -> str:
    """The digest of every installed library's primitive's rules: its entry in each of
    JAX's rule tables, its impl and abstract eval, by content (``walker``: a
    `ContentWalker`), sorted by the primitive's name (`named`: ``lib:module:attr``,
    or its ``name`` and type for one no library module holds). Its JVP or batching
    rule runs while tracing and may leave no equation of it in the jaxpr; a program
    can set one (``ad.primitive_jvps[lib.p] = lib.other_jvp``, reviews 118 and 119).
    JAX's own primitives are keyed as overrides, the program's as user primitives
    (`pcache._guards.registry_key`). Memoized per tables epoch and rule objects."""
    from pcache import _canon, _compat, _guards

    regs, _, user, _, epoch, _, _ = _guards.tables()
    found = _MEMO.get("prims")
    if found is None or found[0] != epoch:
        # (which primitives the tables hold changes only with a write, a new epoch: the
        # walk of every table's every key is made once per epoch, not per key)
        skip = {id(p) for p in user}
        found = (
            epoch,
            tuple(
                {
                    id(p): p
                    for d in regs
                    for p in list(d)
                    if is_a(p, _compat.Primitive)
                    and id(p) not in skip
                    and _canon.jax_primitive_name(p) is None
                }.values()
            ),
        )
        _MEMO["prims"] = found
    # (their impl and abstract eval are attributes, no table: looked at every call)
    now = [(p, *[d.get(p) for d in regs], *_compat.primitive_rules(p)) for p in found[1]]
    e = _MEMO.get("rules")
    if e is not None and e[0] == epoch and len(e[1]) == len(now):
        if all(
            len(a) == len(b) and all(map(operator.is_, a, b))
            for a, b in zip(e[1], now, strict=True)
        ):
            if e[2] is None:
                raise NoReuse("persist-ambiguous-primitives")
            return e[2]
    out = []
    for rules in now:
        w = walker()
        w.registry = True  # (rules JAX made, as `pcache._guards.registry_key` walks them)
        name = named(rules[0]) or ("unnamed", str(rules[0].name), type(rules[0]).__qualname__)
        out.append((name, digest(("rules", tuple(w.value(r) for r in rules[1:])))))
    # (two primitives under one name, with other rules: which has which, no name
    # tells; two a library keeps in a list, their rules swapped, review 160)
    by_name: dict = {}
    for name, d in out:
        by_name.setdefault(repr(name), set()).add(d)
    enc = (
        None
        if any(len(ds) > 1 for ds in by_name.values())
        else digest(("library-rules", tuple(sorted(out, key=repr))))
    )
    _MEMO["rules"] = (epoch, now, enc)
    if enc is None:
        raise NoReuse("persist-ambiguous-primitives")
    return enc


__all__ = ["abc_registrations", "library_rules"]
