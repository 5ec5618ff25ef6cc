"""How `pcache._walk.Walker` keys the ordered mappings of ``collections``."""

from __future__ import annotations

import collections
from typing import TYPE_CHECKING, Any

from pcache._introspect import items
from pcache._usercode import NoReuse, qualname

if TYPE_CHECKING:
    from pcache._walk import Walker

_OD_ITEMS = collections.OrderedDict.items  # (the exact types' own: no override runs)
_FACTORY = collections.defaultdict.__dict__["default_factory"].__get__


def mapping(w: Walker, v: Any, t: type) -> tuple:
    """An ``OrderedDict`` by its items in its own order (``move_to_end``'s), a
    ``defaultdict`` by its factory and items; no attribute of its own."""
    if w._own(v):
        raise NoReuse(f"mutable:{qualname(t)}")
    dd = t is collections.defaultdict
    head = ("dd", w.value(_FACTORY(v))) if dd else ("od",)
    pairs = items(v) if dd else _od_pairs(v)
    return (*head, *[(w.value(k), w.value(x)) for k, x in pairs])


def _od_pairs(v: Any) -> list:
    """An ``OrderedDict``'s items in its own order, which must list the very keys its
    dict holds (``dict.__setitem__(od, k, x)`` adds one its order never lists, which
    ``od[k]`` reads: review 116)."""
    try:
        pairs = list(_OD_ITEMS(v))
    except (KeyError, RuntimeError):
        raise NoReuse("ordered-dict-inconsistent") from None
    try:
        stored = list(dict.items(v))  # (its storage, as ``od[k]`` reads it)
    except RuntimeError:
        raise NoReuse("ordered-dict-inconsistent") from None
    if sorted((id(k), id(x)) for k, x in stored) != sorted((id(k), id(x)) for k, x in pairs):
        raise NoReuse("ordered-dict-inconsistent")
    return pairs


__all__ = ["mapping"]
