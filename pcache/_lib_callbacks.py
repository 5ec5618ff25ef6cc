"""Host callbacks an installed library makes while a program is traced, as data
(issue 27: a persisted trace that holds one).

Equinox's ``error_if`` (and so every diffrax solve under its default
``EQX_ON_ERROR=raise``) binds ``jax.pure_callback(raises, ...)``, where ``raises`` is
a closure the library defines inside ``_error`` over plain data made while tracing
(the messages, the trace-time stack as strings and bytes). Such a callback is stored
as what it is made of, never as code: the module that defines it, its code's
qualified name and content digest, and the values of its closure cells. A new
process rebuilds it from that module's own file (`pcache._provenance`: the compiled
form the import system reads), taking the one code object of that name whose content
is the stored digest, with the module's namespace as its globals and new cells over
the decoded values: the function a fresh trace of the same library version makes.

Only a plain function qualifies, and only when everything about it is proven:
- its globals are a loaded library module's namespace, that module attributed to an
  installed distribution (`pcache._persist_env.attributed`: its version is in the
  key), and its code is code that module's file defines (`is_library_code`);
- no defaults, no attributes of its own, its names its code's;
- it never rebinds a free variable (``nonlocal``: a rebuilt cell is its own, where
  the original may share one with a sibling closure);
- every cell holds ``None``, ``bool``, ``int``, ``float``, ``str``, ``bytes``, or
  tuples and lists of them, each list referred to by nothing but its cell or the list
  holding it, as far as the garbage collector sees (a list the library keeps
  elsewhere would come back a copy);
anything else raises ``ValueError`` with why, and the trace is not stored. The
stored stack strings name the storing process's source lines: what equinox shows
when such a callback raises is the stack of the trace that made it, as it is when
JAX's own cache serves a trace.
"""

from __future__ import annotations

import dis
import sys
import types
import weakref
from typing import Any

from pcache import _compat
from pcache._out_tree import (
    NOT_SCALAR,
    REF_BASE,
    aux_of,
    excess,
    held_name,
    note,
    note_reachable,
    scalar_data,
    scalar_of,
    scan_referrers,
)
from pcache._persist_pack import packed
from pcache._provenance import codes_named
from pcache._usercode import NoReuse, is_library_code, module_dict

MAX_DEPTH = 16
MAX_CELL_BYTES = 1 << 20  # (the encoded cells of one callback)
_REBINDS = frozenset({"STORE_DEREF", "DELETE_DEREF"})


def describe(flat: Any) -> list:
    """``[module, qualified name, code digest, cells]`` of the library closure a
    `_FlatCallback` holds; ValueError (why) if it is not one this module can rebuild.
    (Handed the `_FlatCallback`: no caller's frame names the function, whose holders
    `_unseen` counts.)"""
    from pcache._persist_env import attributed
    from pcache._persist_key import code_digest

    if type(flat) is not _compat.FlatCallback:
        raise ValueError(f"callback:{type(flat).__qualname__}")
    if type(flat.callback_func) is not types.FunctionType:
        raise ValueError(f"callback:{type(flat.callback_func).__qualname__}")
    fn = flat.callback_func
    code, g = fn.__code__, fn.__globals__
    if type(getattr(code, "co_qualname", None)) is not str:
        raise ValueError("callback:no-qualname")  # (Python 3.10: not told apart by name)
    name = g.get("__name__")
    m = sys.modules.get(name) if type(name) is str else None
    if m is None or module_dict(m) is not g or not is_library_code(g, code):
        raise ValueError("callback:not-library-code")
    try:
        attributed(name)
    except NoReuse:
        raise ValueError("callback:unattributed") from None
    if fn.__defaults__ or fn.__kwdefaults__ or fn.__dict__ or fn.__annotations__:
        raise ValueError("callback:defaults-or-attributes")
    if fn.__name__ != code.co_name or fn.__qualname__ != code.co_qualname:
        raise ValueError("callback:renamed")
    if _rebinds(code, frozenset(code.co_freevars)):
        raise ValueError("callback:rebinds-free-variable")
    try:
        values = [c.cell_contents for c in fn.__closure__ or ()]
    except ValueError:
        raise ValueError("callback:empty-cell") from None
    held: list = []
    seen: set = set()  # (no object twice among its cells: `_value`)
    data = [_value(v, 0, held, seen) for v in values]
    if sum(len(repr(d)) for d in data) > MAX_CELL_BYTES:
        raise ValueError("callback:cells-too-large")
    del fn  # (no local of this frame may hold what `_holders` counts the holders of)
    why = _holders(flat, values, held)
    if why is not None:
        raise ValueError(why)
    return [name, code.co_qualname, code_digest(code), data]


def rebuild(e: Any, cells: list) -> tuple[types.FunctionType, str]:
    """The function `describe` described (``e``: its module, code name and digest, and
    the indexes of its cells in ``cells``, one entry's cells as `cell` makes them:
    two callbacks that shared a cell share one again), made afresh, and its
    `content`; ValueError if the entry is malformed or its module does not define
    exactly that code."""
    from pcache._persist_key import code_digest

    if type(e) is not list or len(e) != 4 or type(e[3]) is not list:
        raise ValueError("callback")
    name, qual, digest, refs = e
    if not all(type(x) is str for x in (name, qual, digest)):
        raise ValueError("callback")
    if not all(type(i) is int and 0 <= i < len(cells) for i in refs):
        raise ValueError("callback:cells")
    m = sys.modules.get(name)
    g = module_dict(m) if m is not None else None
    file = g.get("__file__") if g is not None else None
    if type(file) is not str:
        raise ValueError("callback:module")
    found = [c for c in codes_named(file, qual) if code_digest(c) == digest]
    # (named by the module's file, as the import system names what it loads: a
    # bytecode cache holds the name of wherever it was compiled)
    code = _refiled(found[0], file) if found else None
    if code is None or not is_library_code(g, code):
        raise ValueError("callback:code")  # (another version's, or a changed file)
    if len(refs) != len(code.co_freevars):
        raise ValueError("callback:cells")
    closure = tuple(cells[i][0] for i in refs)
    fn = types.FunctionType(code, g, code.co_name, None, closure)
    return fn, _text([name, qual, digest, [cells[i][1] for i in refs]])


def cell(d: Any) -> tuple:
    """(a new cell over what `describe` encoded as ``d``, ``d``); ValueError if ``d``
    is not such an encoding."""
    v = _value_of(d, 0)
    if not _named(d) and _value(v, 0, [], set()) != d:
        raise ValueError("callback:cells")  # (not what `describe` writes)
    return types.CellType(v), d


def content(flat: Any) -> str | None:
    """A stable text of the library closure a `_FlatCallback` holds, for a jaxpr's
    persisted digest (None: not one `describe` accepts)."""
    try:
        return _text(describe(flat))
    except (ValueError, RecursionError):
        return None


def _text(d: list) -> str:
    cells = packed(b"pcache-callback-cells\n", _packable(d[3]))
    return f"libfn:{d[0]}:{d[1]}:{d[2]}:{cells}"


def _refiled(code: types.CodeType, file: str) -> types.CodeType:
    consts = tuple(_refiled(k, file) if type(k) is types.CodeType else k for k in code.co_consts)
    return code.replace(co_filename=file, co_consts=consts)


def _rebinds(code: types.CodeType, free: frozenset) -> bool:
    """Whether ``code`` or a function nested in it stores or deletes one of ``free``
    (the outer function's free variables, by name)."""
    for ins in dis.get_instructions(code):
        if ins.opname in _REBINDS and ins.argval in free:
            return True
    return any(type(k) is types.CodeType and _rebinds(k, free) for k in code.co_consts)


def _value(v: Any, depth: int, held: list, seen: set) -> list:
    """``v`` encoded; a list, and every tuple on the way to one, added to ``held``;
    ValueError where an object in it was in ``seen`` (the callback's other cells' or
    this one's: decoded, each place would get its own, where library code may test
    ``a is b``: review 128; `_out_tree.note`)."""
    t = type(v)
    if depth > MAX_DEPTH:
        raise ValueError("callback:cell-deep")
    try:  # (a library's constant: ``mode is FAST``, review 125; its list: the same)
        got = held_name(v, t)
    except ValueError:
        raise ValueError("callback:cell-rebound") from None
    try:
        if got is not None:
            note_reachable(v, seen)  # (what it holds is that object's: reviews 129, 130)
            return got
        note(v, t, seen)
    except ValueError:
        raise ValueError("callback:cell-shared-object") from None
    got = scalar_data(v)
    if got is not None:
        return got
    if t is bytes:
        return ["y", v.hex()]
    if t is tuple or t is list:
        n = len(held)
        out = ["t" if t is tuple else "l", *[_value(x, depth + 1, held, seen) for x in v]]
        if t is list or len(held) > n:
            held.append(v)
        return out
    raise ValueError(f"callback:cell:{t.__qualname__}")


def _value_of(e: Any, depth: int) -> Any:
    if type(e) is not list or not e or depth > MAX_DEPTH:
        raise ValueError("callback:cell")
    tag, rest = e[0], e[1:]
    got = scalar_of(tag, rest)
    if got is not NOT_SCALAR:
        return got
    if tag == "o":
        return aux_of(e)  # (the object library modules hold under those names now)
    if tag == "y" and len(rest) == 1 and type(rest[0]) is str:
        return bytes.fromhex(rest[0])
    if tag in ("t", "l"):
        items = [_value_of(x, depth + 1) for x in rest]
        return tuple(items) if tag == "t" else items
    raise ValueError("callback:cell")


def _named(d: Any) -> bool:
    """Whether encoded cell ``d`` names a library's object (read back by `aux_of`)."""
    return type(d) is list and bool(d) and (d[0] == "o" or any(_named(x) for x in d[1:]))


def _packable(e: Any) -> Any:
    """An encoded cell value as the tuples `pcache._persist_pack` packs."""
    if type(e) is list:
        return tuple(_packable(x) for x in e)
    return e


def _holders(flat: Any, values: list, held: list) -> str | None:
    """Why the closure ``flat`` holds is not one made for this trace alone (None: it
    is). A function something else holds (a module global, another closure's cell, a
    numpy object array) runs with its state shared by every trace and caller, where a
    rebuilt one has its own (reviews 122, 123: a library's counter); a cell another
    function shares is seen by that one too: it must be another callback (equinox's
    ``raises`` and ``tpu_msg`` share their messages; an entry keeps such sharing,
    `rebuild`) and rebind none of them; a list in a cell (``held``, with the tuples
    on the way to one) nothing but its cell or container may hold (a list the
    library keeps would come back a copy). Every object is checked twice: who the
    garbage collector says refers to it, and that its reference count is no more
    than those references (a holder it does not see: `_excess`). Three heap scans
    at most (`_scan`); no local here names an object counted (its count would be
    off by one)."""
    flat_t = _compat.FlatCallback
    if weakref.getweakrefcount(flat.callback_func):
        return "callback:weakly-held"  # (a registry of live callbacks: review 124)
    closure = flat.callback_func.__closure__ or ()
    objs = [flat.callback_func, *([flat.callback_func.__closure__] if closure else []),
            *closure, *held]  # fmt: skip
    del closure
    refs = scan_referrers(objs)
    ours = {id(objs), id(values), id(held), id(refs)}
    n = len(flat.callback_func.__closure__ or ())
    for i in range(len(objs)):
        if excess(objs[i], len(refs[i])) > REF_BASE:
            return "callback:held" if i == 0 else "callback:cell-held" if i < 2 + n else (
                "callback:held-list")  # fmt: skip
    for r in refs[0]:
        if r is not objs and (type(r) is not flat_t or r.callback_func is not objs[0]):
            return "callback:held"
    # (a referrer among ``objs`` is its index: 0 the function, 1 its closure tuple,
    # then the cells, then the lists and tuples of ``held``)
    if n and not all(r is objs or (type(r) is int and r == 0) for r in refs[1]):
        return "callback:cell-held"  # (the closure tuple, held by another)
    cells = {id(objs[i]) for i in range(2, 2 + n)}
    tuples: dict = {}
    for i in range(2, 2 + n):
        for r in refs[i]:
            if r is objs or (type(r) is int and r == 1):
                continue
            if type(r) is not tuple:
                return "callback:cell-held"  # (a frame, a generator, a container)
            tuples[id(r)] = r
    lists = [id(objs[i]) for i in range(2 + n, len(objs)) if type(objs[i]) is list]
    if len(set(lists)) != len(lists):
        return "callback:held-list"  # (one list twice: two lists when rebuilt)
    for i in range(2 + n, len(objs)):
        if not all((type(r) is int and r >= 2) or id(r) in ours for r in refs[i]):
            return "callback:held-list"
    r = None
    del objs, refs
    if not tuples:
        return None
    return _siblings(flat, tuples, cells)


def _siblings(flat: Any, tuples: dict, cells: set) -> str | None:
    """`_holders` for the other closures sharing a cell (``tuples``: their closure
    tuples, by id; ``cells``: the ids of the callback's cells)."""
    flat_t = _compat.FlatCallback
    objs = list(tuples.values())
    tuples.clear()
    refs = scan_referrers(objs)
    owners: dict = {}
    for i in range(len(objs)):
        if excess(objs[i], len(refs[i])) > REF_BASE:
            return "callback:cell-held"  # (another closure's, held unseen)
        for r in refs[i]:
            if r is objs:
                continue
            if type(r) is not types.FunctionType or r.__closure__ is not objs[i]:
                return "callback:cell-held"
            owners[id(r)] = r
    r = None
    del objs, refs
    for f in owners.values():
        if weakref.getweakrefcount(f):
            return "callback:shared-cell-held"
        closure, free = f.__closure__, f.__code__.co_freevars
        names = [free[i] for i in range(len(closure)) if id(closure[i]) in cells]
        if _rebinds(f.__code__, frozenset(names)):
            return "callback:shared-cell-rebound"
    f = closure = None
    objs = list(owners.values())
    refs = scan_referrers(objs)
    for i in range(len(objs)):
        if excess(objs[i], len(refs[i])) > REF_BASE:
            return "callback:shared-cell-held"
        for r in refs[i]:
            if r is objs or r is owners:
                continue
            if type(r) is not flat_t or id(r.callback_func) not in owners:
                return "callback:shared-cell-held"
    return None


__all__ = ["content", "describe", "rebuild"]
