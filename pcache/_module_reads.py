"""What traced code reads from a module it reaches otherwise than by name: the checks
`pcache._guards` makes where a chain ends at, or passes through, a module a library
object or container holds (reviews 205-208)."""

from __future__ import annotations

import collections
import functools
import gc
import types
import weakref
from typing import Any

from pcache._class_shape import JAX_TYPES
from pcache._introspect import (
    POSING,
    Override,
    class_attr,
    inst_dict,
    is_a,
    plain_module,
    unwatched,
)
from pcache._usercode import NoReuse, is_library_code
from pcache._walk_kinds import class_holds_module

#: C getters that hand back what an object stores (a slot, a namedtuple's field)
_STORED = (types.MemberDescriptorType, type(collections.namedtuple("_T", "a").a))
_ATOMS = frozenset({int, float, complex, str, bytes, bool, type(None), type(...)})
_BOUND = 512  # objects looked into before a value counts as holding a module


def escapes(v: Any, chain: tuple, escaped: Any) -> None:
    """A chain's last object handed on (stored in a cell or a container, passed,
    subscripted, returned: ``escaped`` True; a plain local's alias is read as chains
    of its own): refused where a module is, or may be, among what it holds, as what
    the program's code reads from it there is not guarded (reviews 206-208)."""
    if escaped is True and module_inside(v):
        raise NoReuse(f"module-escapes:{'.'.join(map(str, chain))}")


def module_inside(v: Any) -> bool:
    """Whether ``v`` is, or holds, a module: through containers, partials, a library
    function's or object's own attributes and slots, a library class's MRO (read
    without running code; the program's own objects are walked where they are held).
    Past `_BOUND` objects: may."""
    todo, seen = [v], set()
    while todo:
        x = todo.pop()
        t = type(x)
        if t is types.ModuleType or (POSING and unwatched(t) is types.ModuleType):
            return True
        if t in _ATOMS or id(x) in seen:
            continue
        seen.add(id(x))
        if len(seen) > _BOUND:
            return True
        todo += _held(x, t)
    return False


def _held(x: Any, t: type) -> list:
    """What ``x`` holds that `_class_shape` would describe it by (review 209: dict
    keys, a mapping proxy's items, a property's functions, a weakref's referent, a
    metaclass's attributes, the program's objects a library container holds)."""
    if t is tuple or t is list or t is set or t is frozenset:  # (exactly: nothing more)
        return list(x)
    if t is dict:
        return [*dict.keys(x), *dict.values(x)]
    if is_a(x, list):  # (a library's subclass too: its items and own dict, review 210)
        return [*(list.__getitem__(x, i) for i in range(list.__len__(x))), *_own(x)]
    if is_a(x, set):
        return [*set.__iter__(x), *_own(x)]
    if is_a(x, frozenset):
        return [*frozenset.__iter__(x), *_own(x)]
    if is_a(x, tuple):
        return [*(tuple.__getitem__(x, i) for i in range(tuple.__len__(x))), *_own(x)]
    if is_a(x, dict):
        return [*dict.keys(x), *dict.values(x), *_own(x)]
    if t is types.MappingProxyType:
        return [*x.keys(), *x.values()]
    if is_a(x, functools.partial):
        return [x.func, *x.args, *x.keywords.values(), *_own(x)]
    if is_a(x, property):
        return [x.fget, x.fset, x.fdel, *_own(x)]
    if is_a(x, (staticmethod, classmethod)) or t is types.MethodType:
        return [x.__func__, getattr(x, "__self__", None), *_own(x)]
    if is_a(x, weakref.ref):
        return [x(), *_own(x)]
    if is_a(x, type):
        meta = type(x)
        return (
            [types]
            if class_holds_module(x) or (meta is not type and class_holds_module(meta))
            else []
        )
    if t is types.FunctionType and not is_library_code(x.__globals__, x.__code__):
        return []  # (the program's function: walked where the program holds it)
    if t is types.BuiltinFunctionType:
        return []  # (``math.sqrt``: its ``__self__`` is its module)
    if class_holds_module(t):
        return [types]
    if t is types.FunctionType:  # (a library function's own attributes)
        return _own(x)
    jax_type = JAX_TYPES.get(t)
    if jax_type is not None:  # (JAX's array, tree structure or compiled function: none;
        # a jit object: what its description reads, its function and options, not the
        # tree registry its C fields hold, which the program's code cannot read from it)
        parts = jax_type[1](x) if jax_type[0] == "jit" else ()
        return [types] if parts is None else [*parts, *_own(x)]
    # (what the interpreter sees it hold, read without running code: its dict and
    # slots, a C object's fields: ``operator.methodcaller``'s arguments, a deque's
    # items, review 211)
    return [r for r in gc.get_referents(x) if r is not t]


def _own(x: Any) -> list:
    """What a subclass's instance holds in its own dict (what `_held` opens beside
    what its builtin base holds)."""
    try:
        own = inst_dict(x)
    except Override:
        return [types]
    return list(own.values()) if own is not None else []


def data_descriptor(v: Any) -> bool:
    t = type(v)
    return v is not None and (class_attr(t, "__set__") or class_attr(t, "__delete__")) is not None


def static_chain(v: Any, attrs: tuple) -> tuple[bool, Any]:
    """(whether the chain ``attrs`` read from object ``v`` may pass through a module,
    the object it ends at or None if unknown), read without running code: an object's
    own dict, then its class's; a slot's or a namedtuple field's value; a property of
    the program's own code stops (scanned: a module it returns escapes); any other
    descriptor, a name not found (a ``__getattr__``'s, a metaclass's) or a ``__dict__``
    a class defines itself: unknown, so may if the chain reads on (review 208)."""
    for i, attr in enumerate(attrs):
        more = i < len(attrs) - 1
        cls = is_a(v, type)
        k = v if cls else type(v)
        got = class_attr(k, attr)
        if got is not None and not cls and data_descriptor(got):
            if type(got) in _STORED:
                try:
                    got = got.__get__(v, k)
                except AttributeError:
                    return more, None
            elif type(got) is property and _programs(got.fget):
                return False, None
            else:
                return more, None
        else:
            try:
                own = None if cls else inst_dict(v)
            except Override:
                return True, None
            if own is not None and attr in own:
                got = own[attr]
            elif got is None:
                return more, None
            elif type(got) is staticmethod:  # (what ``__get__`` hands back: review 209)
                got = got.__func__
            elif hasattr(type(got), "__get__") and type(got) is not types.FunctionType:
                return more, None  # (another descriptor's ``__get__``: unknown)
        if plain_module(got):
            return True, None
        v = got
    return False, v


def _programs(f: Any) -> bool:
    return type(f) is types.FunctionType and not is_library_code(f.__globals__, f.__code__)


__all__ = ["data_descriptor", "escapes", "module_inside", "static_chain"]
