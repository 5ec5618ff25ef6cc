"""What a trace's output tree holds beside its structure, and whether another call
may be handed it: in process (the memo shares the recorded tree among equal
callables), and across processes (stored as data, `aux_data`).

JAX unflattens a call's outputs with the tree its trace made; a custom node's
auxiliary data becomes part of what the caller gets back (equinox sets a Module's
static fields from it). JAX itself hands one tree to every call of one jit object;
a reuse hands it to the calls of equal callables too, which stock JAX traces anew.

* Shareable (`verdict` None): immutable data (None, bool, int, float, complex, str,
  bytes, tuples and frozensets of them), an object a library module holds by name
  (the flatten of equinox's Modules puts its ``MISSING`` sentinel there: the same
  object in every trace), and a tree of such nodes (equinox's ``Static`` holds one).
* Data but not shareable (``output-tree-mutable``): a list among them (``Static``'s
  leaves): a caller may change it, and a caller of another callable would see that.
  Not recorded in process; stored across processes, since each serve decodes the
  tree afresh (a new list per trace, as stock JAX makes), when the list was made for
  the tree alone (`lists_fresh`: not one the program or a library holds, which stock
  JAX hands back itself).
* Anything else (a function, the program's object, a class made while tracing):
  ``output-tree-objects``, neither recorded nor stored.
"""

from __future__ import annotations

import contextlib
import gc
import struct
import sys
import threading
import types
from collections.abc import Iterator
from typing import Any

from pcache import _compat
from pcache._compat.jaxpr_arrays import Stale
from pcache._holders import holders_index, library_held, library_holders
from pcache._introspect import interned, is_a, names, type_ids
from pcache._snapshots import unchanged
from pcache._usercode import is_library_type

_PURE = type_ids((type(None), bool, int, float, complex, str, bytes))
MUTABLE, OBJECTS = "output-tree-mutable", "output-tree-objects"
#: Nesting of auxiliary data (tuples, lists, trees) a stored tree may hold.
MAX_AUX_DEPTH = 16


def verdict(td: Any, keyed: set) -> str | None:
    """None if every node of output tree ``td`` is shareable, else `MUTABLE` or
    `OBJECTS` (the module's rules). A node's type must be a library class or one the
    call's key holds (``keyed``: ids; not a class made while tracing: review 31)."""
    worst: list = [None]
    if not _tree(td, keyed, holders_index(), worst, 0):
        return OBJECTS
    return worst[0]


def _tree(td: Any, keyed: set, held: dict, worst: list, depth: int) -> bool:
    nd = td.node_data()
    if nd is None:
        return True
    if depth > MAX_AUX_DEPTH or (id(nd[0]) not in keyed and not is_library_type(nd[0])):
        return False
    aux = nd[1]
    if nd[0] is dict and type(aux) is list:
        aux = tuple(aux)  # (a dict's keys, as a list made by ``node_data`` for us alone)
    return _aux(aux, keyed, held, worst, depth) and all(
        _tree(c, keyed, held, worst, depth + 1) for c in td.children()
    )


def _aux(v: Any, keyed: set, held: dict, worst: list, depth: int) -> bool:
    t = type(v)
    if id(t) in _PURE:  # (by identity: `_introspect.by_id`)
        return True
    if depth > MAX_AUX_DEPTH:
        return False
    if t is tuple or t is frozenset or t is list:
        if t is list:
            worst[0] = MUTABLE  # (a list there would be shared: review 90)
        return all(_aux(x, keyed, held, worst, depth + 1) for x in v)
    if t is _compat.PyTreeDef:
        return _tree(v, keyed, held, worst, depth + 1)
    return library_held(v, t, held)


# ------------------------------------------------------------ across processes


def scan_referrers(objs: list) -> list:
    """Every referrer the garbage collector sees of each of ``objs``, once per
    reference it holds (``objs`` itself among them), a referrer that is one of
    ``objs`` by its index (held, it would be one more reference to count): one heap
    scan."""
    want = {id(o): i for i, o in enumerate(objs)}
    out: list = [[] for _ in objs]
    for r in gc.get_referrers(*objs):
        j = want.get(id(r))
        for x in gc.get_referents(r):
            i = want.get(id(x))
            if i is not None and objs[i] is x:
                out[i].append(r if j is None else j)
    r = x = None
    return out


def excess(obj: Any, seen: int) -> int:
    """``obj``'s references beyond ``seen`` (those its referrers hold). Always called
    with a temporary (``objs[i]``), never a local, as `REF_BASE` was measured."""
    return sys.getrefcount(obj) - seen


REF_BASE = excess(object(), 0)  # (what the call itself holds: calibrated, per interpreter)


def lists_fresh(td: Any) -> bool:
    """Whether every list in the auxiliary data of ``td`` was made for this tree
    alone (equinox's ``Static`` flattens a value into a new list): nothing outside
    the tree's auxiliary data refers to it, or to a container holding it, as far as
    the garbage collector sees (a closure cell, a dict, an instance, a module; a
    reference held only in C is not seen). A list the program or a library holds is
    handed back itself by stock JAX, a decoded copy by a served trace (review 117):
    such a tree is not stored."""
    roots: list = []  # (node data tuples, kept alive: their ids are theirs)
    held: list = []  # (the lists, and every container on the way to one)
    _containers(td, roots, held, 0)
    if not held:
        return True
    lists = [id(x) for x in held if type(x) is list]
    if len(set(lists)) != len(lists):
        return False  # (one list twice in the tree: decoded, two lists: review 118)
    mine = {id(x) for x in roots} | {id(roots), id(held)}
    refs = scan_referrers(held)
    for i in range(len(held)):  # (also what the collector does not see: review 125)
        if excess(held[i], len(refs[i])) > REF_BASE:
            return False
        for r in refs[i]:
            if not (type(r) is int or id(r) in mine or type(r) is _compat.PyTreeDef):
                return False
    return True


def _containers(td: Any, roots: list, held: list, depth: int) -> None:
    nd = td.node_data()
    if nd is None or depth > MAX_AUX_DEPTH:
        return
    roots.append(nd)
    _lists_in(nd[1], roots, held, depth)
    for c in td.children():
        _containers(c, roots, held, depth + 1)


def _lists_in(v: Any, roots: list, held: list, depth: int) -> bool:
    """Whether ``v`` holds a list (then it is in ``held``, after those it holds)."""
    t = type(v)
    if depth > MAX_AUX_DEPTH:
        return False
    if t is _compat.PyTreeDef:
        n = len(held)
        _containers(v, roots, held, depth + 1)
        return len(held) > n
    if t is not tuple and t is not list and t is not frozenset:
        return False
    if library_held(v, t):
        return False  # (stored by its names, read back as that very object: `held_name`)
    found = [_lists_in(x, roots, held, depth + 1) for x in v]
    if t is list or any(found):
        held.append(v)
        return True
    return False


NOT_SCALAR = object()  # (`scalar_of`: not one of its encodings)

_SCOPE = threading.local()  # .seen, .cells: the ids `note` was told of, in one scope


@contextlib.contextmanager
def identity_scope() -> Iterator[None]:
    """Where no object `note` is told of may come twice: one stored trace's output
    tree and parameters (and its callbacks' cells: each object in one callback's
    cells once, and in no tree or parameter). Stock JAX hands back the very objects
    its trace made, so two places holding one string, number or tuple hold one again
    (``a is b``); decoded, each place gets its own. Nested scopes are the outer one."""
    if getattr(_SCOPE, "seen", None) is not None:
        yield
        return
    _SCOPE.seen, _SCOPE.cells = set(), set()
    try:
        yield
    finally:
        _SCOPE.seen = _SCOPE.cells = None


def by_value(v: Any, t: type) -> bool:
    """Whether ``v``'s identity follows from its value in every process (None,
    bools, CPython's cached small ints, empty and Latin-1 one-character strings and
    bytes, interned strings, the empty tuple): decoded, it is that very object."""
    if v is None or t is bool:
        return True
    if t is int:
        return -5 <= v <= 256
    if t is str:
        return _cached_str(v) or interned(v) is True
    if t is bytes or t is tuple:
        return len(v) < (2 if t is bytes else 1)
    return False


def _cached_str(v: str) -> bool:
    return len(v) < 2 and (not v or ord(v) < 256)  # (CPython's own: one object each)


def note_reachable(v: Any, seen: set | None = None) -> None:
    """`note` what a library object stored by its names holds (read back as that very
    object, with all it holds): an item or attribute of it encoded elsewhere by value
    would come back another object (reviews 129, 130: ``(ORDER, ORDER[1])``, a
    NamedTuple's or an instance's field). What the garbage collector says it refers
    to, transitively, not into classes, functions or modules (named by what they
    are); ValueError past `MAX_HELD` objects."""
    mark = ("o", id(v))
    scope = getattr(_SCOPE, "seen", None)
    kept = scope if seen is None else seen
    if kept is None or mark in kept:
        return  # (the same named object again: read back as that one object again)
    kept.add(mark)
    todo, n = [v], 0
    while todo:
        for x in gc.get_referents(todo.pop()):
            t = type(x)
            if is_a(x, type) or t in _OPAQUE or by_value(x, t):
                continue
            n += 1
            if n > MAX_HELD:
                raise ValueError("shared-object:held-large")
            if ("r", id(x)) in kept:
                continue
            kept.add(("r", id(x)))
            note(x, t, seen)
            todo.append(x)


MAX_HELD = 4096
_OPAQUE = frozenset({types.FunctionType, types.ModuleType, types.CodeType,
                     types.BuiltinFunctionType, types.MethodType, types.CellType})  # fmt: skip


def note(v: Any, t: type, seen: set | None = None) -> None:
    """ValueError if ``v``, about to be encoded by value, was encoded before: in
    ``seen`` (one callback's cells; then also not in the scope's trees and params),
    else in the `identity_scope`'s trees and params or any callback's cells; where
    decoding would make two objects of one (review 128). No scope and no ``seen``:
    not looked at."""
    if by_value(v, t):
        return
    if seen is not None:
        if id(v) in seen:
            raise ValueError(f"shared-object:{t.__name__}")
        seen.add(id(v))
    trees = getattr(_SCOPE, "seen", None)
    if trees is None:
        return
    if id(v) in trees or (seen is None and id(v) in _SCOPE.cells):
        raise ValueError(f"shared-object:{t.__name__}")
    (_SCOPE.cells if seen is not None else trees).add(id(v))


def scalar_data(v: Any) -> list | None:
    """``None``, ``bool``, ``int``, ``str`` (exact types) and ``float`` (by its bits)
    as JSON lists; None for anything else (also `pcache._lib_callbacks`' cells)."""
    t = type(v)
    if v is None:
        return ["n"]
    if t is str and not _cached_str(v) and interned(v) is not False:
        # (an interned string comes back interned: the library's own ``"fast"``
        # literal is that object, ``mode is "fast"``; unknown here: not encoded)
        return ["si", v] if interned(v) else None
    if t is bool or t is int or t is str:
        return [{bool: "b", int: "i", str: "s"}[t], v]
    if t is float:
        return ["f", struct.pack("<d", v).hex()]
    return None


def scalar_of(tag: Any, rest: list) -> Any:
    """What `scalar_data` encoded as ``[tag, *rest]``, or `NOT_SCALAR`."""
    want = {"b": bool, "i": int, "s": str}.get(tag)
    if want is not None and len(rest) == 1 and type(rest[0]) is want:
        return rest[0]
    if tag == "n" and not rest:
        return None
    if tag == "si" and len(rest) == 1 and type(rest[0]) is str and not _cached_str(rest[0]):
        return sys.intern(rest[0])
    if tag == "f" and len(rest) == 1 and type(rest[0]) is str and len(rest[0]) == 16:
        return struct.unpack("<d", bytes.fromhex(rest[0]))[0]
    return NOT_SCALAR


def aux_data(v: Any, depth: int = 0, node_ok: Any = None) -> Any:
    """A custom node's auxiliary data as JSON lists (exact types; floats by their
    bits; a library-held object by the name a library module holds it under; a
    nested tree by `_compat.out_tree_data`, ``node_ok`` its classes); ValueError for
    anything else."""
    from pcache._persist_key import resolve_name

    t = type(v)
    if depth > MAX_AUX_DEPTH:
        raise ValueError("out-tree:aux-deep")
    got = held_name(v, t)  # (before its value: library code may test ``is FAST``)
    if got is not None:
        note_reachable(v)  # (what it holds is that object's: ``(ORDER, ORDER[1])``)
        return got
    if not is_a(v, type):  # (what comes back a new object, but one per object: `note`)
        note(v, t)
    got = scalar_data(v)
    if got is not None:
        return got
    if t is tuple or t is list:
        return ["t" if t is tuple else "l", *[aux_data(x, depth + 1, node_ok) for x in v]]
    if t is _compat.PyTreeDef:
        enc = _compat.out_tree_data(v, lambda a: aux_data(a, depth + 1, node_ok), node_ok)
        return ["T", enc]
    if is_a(v, type) and is_library_type(v):
        # (a library's class, by its own module and qualified name, where it resolves
        # to itself: equinox's ``EnumerationItem`` holds diffrax's ``RESULTS``; not by
        # an alias a library may rebind, ``ACTIVE = KindA``: review 122)
        mod, qual = names(v)[2], names(v)[1]
        if type(mod) is not str or type(qual) is not str or resolve_name(mod, qual) is not v:
            raise ValueError(f"out-tree:aux-class:{t.__name__}")
        if _rebound(mod, qual) or not unchanged(mod, qual):
            raise ValueError(f"out-tree:aux-rebound:{qual}")
        return ["K", mod, qual]
    raise ValueError(f"out-tree:aux:{t.__name__}")


def held_name(v: Any, t: type) -> list | None:
    """``["o", names]``: every (module, attribute) naming ``v`` where library modules
    hold that very object (a sentinel, or a constant a library tests by identity:
    ``FAST = "fast"``, review 125), each read back in a new process (the least one
    alone may be an alias the library rebinds, ``CUR_MARK = MARK_A``: review 122);
    None if no library holds it; ValueError if its module's code may rebind one of
    those names while running (the library's code may reach the object another way
    while the name holds a new one: reviews 123, 124)."""
    if not library_held(v, t):
        return None
    held = sorted(set(library_holders(v)))
    if not held:  # (held where no module's path reaches it now: review 140)
        raise ValueError(f"out-tree:aux-unnamed:{t.__name__}")
    if any(_rebound(*h) or not unchanged(*h) for h in held):
        raise ValueError(f"out-tree:aux-rebound:{t.__name__}")
    # (a string, number or tuple with its value too, compared when read back: the
    # program's own interned ``"mean"`` may be the very object a library holds under a
    # name the library later points elsewhere, review 126)
    value = _value_data(v) if t in (str, int, float, tuple, bytes) else None
    return ["o", [list(h) for h in held], *([value] if value is not None else [])]


def _value_data(v: Any) -> Any:
    """An immutable value's encoding (`scalar_data`, tuples of them, bytes as hex);
    None where it holds anything else (then only its names read it back)."""
    got = scalar_data(v)
    if got is not None:
        return got
    if type(v) is bytes:
        return ["y", v.hex()]
    if type(v) is tuple:
        items = [_value_data(x) for x in v]
        return None if any(x is None for x in items) else ["t", *items]
    return None


def _rebound(module: str, attr: str) -> bool:
    """Whether library module ``module``'s own code rebinds its global ``attr`` (a
    class attribute, ``Class.x``, is not looked at: a documented blind spot)."""
    from pcache._provenance import rebinds_global
    from pcache._usercode import module_dict

    m = sys.modules.get(module)
    file = (module_dict(m) or {}).get("__file__") if m is not None else None
    if type(file) is not str:
        return True
    return rebinds_global(file, attr.partition(".")[0])


def aux_of(e: Any, depth: int = 0) -> Any:
    """What `aux_data` encoded, rebuilt (a library object: the one its module holds
    under that name now); ValueError if malformed."""
    from pcache._persist_key import resolve_name

    if type(e) is not list or not e or depth > MAX_AUX_DEPTH:
        raise ValueError("out-tree:aux")
    tag, rest = e[0], e[1:]
    got = scalar_of(tag, rest)
    if got is not NOT_SCALAR:
        return got
    if tag in ("t", "l"):
        items = [aux_of(x, depth + 1) for x in rest]
        return tuple(items) if tag == "t" else items
    if tag == "T" and len(rest) == 1:
        return _compat.out_tree_of(rest[0], lambda a: aux_of(a, depth + 1))
    if tag == "K" and len(rest) == 2 and all(type(x) is str for x in rest):
        got = resolve_name(*rest)
        if is_a(got, type) and is_library_type(got) and [names(got)[2], names(got)[1]] == rest:
            if unchanged(*rest):
                return got
        raise Stale("out-tree:aux-class")  # (not that class there now)
    if tag == "o" and len(rest) in (1, 2) and type(rest[0]) is list and rest[0]:
        held = rest[0]
        if all(type(h) is list and len(h) == 2 and all(type(x) is str for x in h) for h in held):
            got = resolve_name(*held[0])
            same = all(resolve_name(*h) is got and unchanged(*h) for h in held)
            if same and got is not None and library_held(got, type(got)):
                if len(rest) == 1 or _value_data(got) == rest[1]:
                    return got
            raise Stale("out-tree:aux-object")  # (its names hold others now)
    raise ValueError("out-tree:aux")


__all__ = [
    "MUTABLE",
    "OBJECTS",
    "aux_data",
    "aux_of",
    "by_value",
    "identity_scope",
    "lists_fresh",
    "note",
    "note_reachable",
    "verdict",
]
