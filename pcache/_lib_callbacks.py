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
import gc
import sys
import types
from typing import Any

from pcache import _compat
from pcache._out_tree import NOT_SCALAR, scalar_data, scalar_of
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
    if _unseen(flat.callback_func, _BASE):
        raise ValueError("callback:held")  # (by what the garbage collector does not see)
    if flat.callback_func.__closure__ is not None:
        if _unseen(flat.callback_func.__closure__, _BASE):
            raise ValueError("callback:cell-held")
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
    cells = fn.__closure__ or ()
    try:
        values = [c.cell_contents for c in cells]
    except ValueError:
        raise ValueError("callback:empty-cell") from None
    held: list = []
    data = [_value(v, 0, held) for v in values]
    if held and not _fresh(held, (*cells, values)):
        raise ValueError("callback:held-list")
    why = _made_for_trace(fn, cells, values)
    if why is not None:
        raise ValueError(why)
    if sum(len(repr(d)) for d in data) > MAX_CELL_BYTES:
        raise ValueError("callback:cells-too-large")
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
    if _value(v, 0, []) != d:
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


def _value(v: Any, depth: int, held: list) -> list:
    """``v`` encoded; a list, and every tuple on the way to one, added to ``held``."""
    t = type(v)
    if depth > MAX_DEPTH:
        raise ValueError("callback:cell-deep")
    got = scalar_data(v)
    if got is not None:
        return got
    if t is bytes:
        return ["y", v.hex()]
    if t is tuple or t is list:
        n = len(held)
        out = ["t" if t is tuple else "l", *[_value(x, depth + 1, held) for x in v]]
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
    if tag == "y" and len(rest) == 1 and type(rest[0]) is str:
        return bytes.fromhex(rest[0])
    if tag in ("t", "l"):
        items = [_value_of(x, depth + 1) for x in rest]
        return tuple(items) if tag == "t" else items
    raise ValueError("callback:cell")


def _packable(e: Any) -> Any:
    """An encoded cell value as the tuples `pcache._persist_pack` packs."""
    if type(e) is list:
        return tuple(_packable(x) for x in e)
    return e


def _made_for_trace(fn: Any, cells: tuple, values: list) -> str | None:
    """Why ``fn`` is not a closure made for one trace alone (None: it is). A function
    something else holds (a module global, another closure's cell) runs with its
    state shared by every trace and caller, where a rebuilt one has its own (review
    122: a library's counter); a cell another function shares is seen by that one
    too: it must be another callback (equinox's ``raises`` and ``tpu_msg`` share
    their messages; an entry keeps such sharing, `rebuild`) and rebind none of them.
    (No nested scope here names a function: a cell of this frame would be one more
    referrer.)"""
    flat = _compat.FlatCallback
    for r in gc.get_referrers(fn):
        if type(r) is not flat or r.callback_func is not fn:
            return "callback:held"
    if not cells:
        return None
    for i in range(len(cells)):
        if _unseen(cells[i], _BASE):
            return "callback:cell-held"
    tuples: dict = {}
    for r in gc.get_referrers(*cells):
        if type(r) is not tuple:
            return "callback:cell-held"  # (a frame, a generator, a container)
        tuples[id(r)] = r
    owners: dict = {}
    for r in gc.get_referrers(*tuples.values()):
        if r is tuples:
            continue
        if type(r) is not types.FunctionType or id(r.__closure__) not in tuples:
            return "callback:cell-held"
        if r is not fn:
            owners[id(r)] = r
    r = None  # (a local naming one would count as a holder below)
    for k in list(tuples):
        if tuples[k] is not cells and _unseen(tuples[k], _BASE):
            return "callback:cell-held"  # (another closure's, held unseen)
    if not owners:
        return None
    for k in list(owners):
        if _unseen(owners[k], _BASE):
            return "callback:shared-cell-held"
    mine = set(map(id, cells))
    for f in owners.values():
        closure, free = f.__closure__, f.__code__.co_freevars
        names = [free[i] for i in range(len(closure)) if id(closure[i]) in mine]
        if _rebinds(f.__code__, frozenset(names)):
            return "callback:shared-cell-rebound"
    for r in gc.get_referrers(*owners.values()):
        if r is owners:
            continue
        if type(r) is not flat or id(r.callback_func) not in owners:
            return "callback:shared-cell-held"
    return None


def _fresh(held: list, ours: tuple) -> bool:
    """Whether every list in ``held`` (with the tuples on the way to one) is referred
    to only by ``ours`` (the cells, the list of their values) or by another of
    ``held``; one list twice comes back as two: refused."""
    lists = [id(x) for x in held if type(x) is list]
    if len(set(lists)) != len(lists):
        return False
    for i in range(len(held)):
        if _unseen(held[i], _BASE):
            return False  # (a numpy object array holding it, say: review 123)
    mine = {id(x) for x in (*held, *ours)} | {id(held)}
    return all(id(r) in mine for r in gc.get_referrers(*held))


def _unseen(obj: Any, base: int | None = None) -> Any:
    """Whether something the garbage collector does not see holds ``obj`` (a numpy
    object array, a C extension's object, a frame's local): its reference count is
    more than its referrers' and ``base``, what this call itself holds, measured
    once with ``base`` None (`_BASE`). Always called with a temporary (``x[i]``,
    ``a.b``), never a local, as `_BASE` was measured (review 123)."""
    n = sys.getrefcount(obj) - len(gc.get_referrers(obj))
    return n if base is None else n > base


_BASE = _unseen(object())


__all__ = ["content", "describe", "rebuild"]
