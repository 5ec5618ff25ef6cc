"""What traced code reads from a module it reaches otherwise than by name: the checks
`pcache._guards` makes where a chain ends at, or passes through, a module a library
object holds (reviews 205-207)."""

from __future__ import annotations

import types
from typing import Any

from pcache._introspect import Override, class_attr, inst_dict, is_a
from pcache._usercode import NoReuse, is_library_type
from pcache._walk_kinds import class_holds_module


def escapes(v: Any, chain: tuple, escaped: Any) -> None:
    """A library module a chain ends at, handed on (stored in a cell or a container,
    passed, returned: ``escaped`` True; a plain local's alias is read as chains of its
    own): what is read from it there is not guarded (review 206)."""
    if escaped is True and (is_a(v, types.ModuleType) or _holds_a_module(v)):
        raise NoReuse(f"module-escapes:{'.'.join(map(str, chain))}")


def _holds_a_module(v: Any) -> bool:
    """Whether a library's class, function or object holds a module as an attribute
    (one level: its own dict, its classes'): handed on, what the program's code reads
    through it there (``obj.m.K``) is not guarded (review 207)."""
    if v is None or type(v) in (int, float, str, bool, tuple):
        return False
    k = v if is_a(v, type) else type(v)
    if not is_library_type(k):
        return False  # (the program's own: walked where it is held)
    if class_holds_module(k):
        return True
    try:
        own = inst_dict(v) if not is_a(v, type) else None
    except Override:
        return True
    return own is not None and any(type(x) is types.ModuleType for x in own.values())


def data_descriptor(v: Any) -> bool:
    t = type(v)
    return v is not None and (class_attr(t, "__set__") or class_attr(t, "__delete__")) is not None


def holds_module(v: Any, attrs: tuple) -> bool:
    """Whether the chain ``attrs`` read from object ``v`` may pass through a module,
    read without running code (an object's own dict, then its class's; a data
    descriptor, a ``__dict__`` a class defines itself or a name not found before the
    chain's end: may)."""
    for i, attr in enumerate(attrs):
        k = v if is_a(v, type) else type(v)
        # (what a library's descriptor or ``__getattr__`` computes is unknown; the
        # program's own code is scanned: a module it returns escapes, refused)
        unknown = i < len(attrs) - 1 and is_library_type(k)
        got = class_attr(k, attr)
        if got is not None and data_descriptor(got) and not is_a(v, type):
            return unknown
        try:
            own = None if is_a(v, type) else inst_dict(v)
        except Override:
            return True
        if own is not None and attr in own:
            got = own[attr]
        if is_a(got, types.ModuleType):
            return True
        if got is None:
            return unknown
        v = got
    return False


__all__ = ["data_descriptor", "escapes", "holds_module"]
