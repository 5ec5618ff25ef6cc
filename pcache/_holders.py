"""Which loaded library modules hold an object, by attribute: an index of library
namespaces, each module indexed once when first seen loaded (not a walk of them all
per object asked). The key walk keys a value's identity with an object a library
holds (library code may compare with it by ``is``), and the persisted key names
such an object, or a class a library function made, by the module attribute
holding it.

JAX-free.
"""

from __future__ import annotations

import sys
import threading
from importlib.machinery import ModuleSpec
from types import (
    BuiltinFunctionType,
    ClassMethodDescriptorType,
    GetSetDescriptorType,
    MemberDescriptorType,
    MethodDescriptorType,
    ModuleType,
    WrapperDescriptorType,
)
from types import FunctionType as _FUNCTION
from typing import Any

from pcache._dictwatch import Watch
from pcache._introspect import cdict, flags, is_a, items
from pcache._memos import collector_paused, memo
from pcache._usercode import is_library_module, module_dict

_HOLDERS: dict = memo("persist.library_holders", {})  # index, modules indexed
_LOCK = threading.RLock()


def library_held(v: Any, t: type, index: dict | None = None) -> bool:
    """Whether ``v`` is the very object a library holds, as a module attribute or a
    class attribute of a class a library module holds (``FAST = "fast mode!"``,
    ``Mode.FAST``): library code may compare a value with it by identity (reviews 76,
    79; an item of a library's container, ``MODES["fast"]``, is not seen). Not those
    whose identity the value decides (CPython's cached small ints, empty and
    one-character strings), nor functions, classes and modules (keyed by identity).
    ``index``: `holders_index` as read at the start of a walk that runs no user code."""
    holders = (_index() if index is None else index).get(id(v))
    if holders is None:  # (most values: one lookup)
        return False
    if t is int:
        if -5 <= v <= 256:
            return False
    elif t in (str, bytes, tuple) and (not v or (len(v) == 1 and t is not tuple and
                                              (t is bytes or ord(v) < 256))):  # fmt: skip
        return False  # (CPython's cached empty and Latin-1 one-character ones)
    elif v is None or t is bool or t is _FUNCTION or t is ModuleType or is_a(v, type):
        return False
    return any(_holds(h, v) for h in holders)


def module_held(v: Any) -> bool:
    """Whether a loaded library module holds ``v`` itself as a module attribute."""
    return any(len(h) == 2 and _holds(h, v) for h in _index().get(id(v), ()))


def library_holders(v: Any, of_type: bool = False) -> list:
    """Every (module, attribute or ``Class.attribute``) of a loaded library module
    holding ``v`` (``of_type``: an instance of class ``v``, as a module attribute),
    each read back."""
    if not of_type and type(v) in _UNINDEXED:  # (not in the index: looked for here)
        found = [h for name, m in items(sys.modules) if is_library_module(m)
                 for h in _holding(name, module_dict(m), v)]  # fmt: skip
    else:
        found = _index().get(("type", id(v)) if of_type else id(v), ())
    return [(h[0], ".".join(h[1:])) for h in found if _holds(h, v, of_type)]


def _holding(name: str, d: dict | None, v: Any) -> list:
    """(name, attribute) and (name, class, attribute) of namespace ``d`` holding ``v``."""
    out = []
    for k, x in items(d or {}):
        if type(k) is str:
            if x is v:
                out.append((name, k))
            elif flags(type(x)) & _TYPE_SUBCLASS:
                out += [(name, k, a) for a, y in items(cdict(x)) if y is v and type(a) is str]
    return out


def _holds(h: tuple, v: Any, of_type: bool = False) -> bool:
    """Whether (module, attribute) or (module, class, attribute) ``h`` still holds
    ``v`` (an instance of ``v``: ``of_type``)."""
    d = module_dict(sys.modules.get(h[0]))
    x = d.get(h[1], _HOLDERS) if d is not None else _HOLDERS
    for part in h[2:]:  # (a class's attribute; a nested class's: review 138)
        x = cdict(x).get(part, _HOLDERS) if is_a(x, type) else _HOLDERS
    return (type(x) if of_type else x) is v


def holders_index() -> dict:
    """The index `library_held` reads: id -> holders (a dict not to be written)."""
    return _index()


def _index() -> dict:
    """id -> holders, each library module indexed once when first seen loaded (not
    a walk of them all per value asked), looked for again whenever ``sys.modules``
    was written (a module loaded as another was removed: review 89)."""
    ready = _HOLDERS.get("ready")  # (a watch published with the index it vouches for)
    if ready is not None and ready[0].still((sys.modules,)):
        return ready[1]
    with _LOCK, collector_paused():  # (~70k holders: `_memos.collector_paused`)
        index = _HOLDERS.setdefault("index", {})
        done = _HOLDERS.setdefault("done", {})
        watch = Watch()
        watch.start((sys.modules,))
        complete = True
        classes: dict = {}  # (this pass: a class many modules hold is read once)
        for name, m in items(sys.modules):
            if done.get(name) is m:
                continue
            spec = (module_dict(m) or {}).get("__spec__")
            if type(spec) is ModuleSpec and vars(spec).get("_initializing"):
                complete = False  # (still running its body: indexed next time)
                continue
            if is_library_module(m):
                _index_module(index, name, module_dict(m), classes)
            done[name] = m
        _HOLDERS["ready"] = (watch, index) if complete else None
        return index


def _index_module(index: dict, name: str, d: dict | None, classes: dict) -> None:
    add = index.setdefault
    # (a private copy, made in C: iterated without another thread's writes)
    for k, x in dict.copy(d or {}).items():
        if type(k) is not str:
            continue
        tx = type(x)
        if tx in _UNINDEXED:
            continue  # (functions and modules: keyed by what they are, never asked here)
        add(id(x), []).append((name, k))
        if id(tx) in _NAMED_TYPES:
            continue  # (a builtin value: no class attributes)
        add(("type", id(tx)), []).append((name, k))
        if flags(tx) & _TYPE_SUBCLASS:  # (a class: the interpreter's own flag)
            _index_class(add, (name, k), x, classes, 0)


def _index_class(add: Any, path: tuple, cls: type, classes: dict, depth: int) -> None:
    """The attributes of library class ``cls``, held at ``path`` ((module, class) or
    deeper), and of every class it holds as an attribute (a nested class, an alias:
    reviews 138, 139), each followed once a pass, by identity. Not its methods, nor
    the bookkeeping the class statement writes (its name, doc, module), but anything
    else under a dunder name (a property over one getter as another, a ``partial``, an
    instance, a string compared by ``is``: told apart by identity only, reviews
    137-140). Each class's attributes are read once a pass (`classes` holds it)."""
    got = classes.get(id(cls))
    if got is None:
        attrs, nested = [], []
        for a, y in cdict(cls).copy().items():
            ty = type(y)
            if type(a) is not str or id(ty) in _UNHELD:
                continue
            if a in _BOOKKEEPING:
                continue
            attrs.append((a, id(y)))
            if flags(ty) & _TYPE_SUBCLASS:
                nested.append((a, y))
        got = classes[id(cls)] = [cls, attrs, nested, False]
    for a, i in got[1]:
        add(i, []).append((*path, a))
    if got[3] or depth >= _MAX_NESTING:
        return
    got[3] = True  # (its classes followed from the first path that reached it)
    for a, y in got[2]:
        _index_class(add, (*path, a), y, classes, depth + 1)


_MAX_NESTING = 64  # (classes holding classes: a bound on the index's recursion)
#: What the interpreter and the class statement write into every class, which no
#: program compares by identity (review 140: a library's own ``__mode__ = "fast"``
#: is indexed, as any other name)
_BOOKKEEPING = frozenset({
    "__module__", "__qualname__", "__doc__", "__dict__", "__weakref__", "__slots__",
    "__annotations__", "__orig_bases__", "__parameters__", "__match_args__",
    "__firstlineno__", "__static_attributes__", "__abstractmethods__", "_abc_impl",
    "__hash__", "__dataclass_fields__", "__dataclass_params__",
})  # fmt: skip


#: Module and class attributes not indexed (most of them; `library_holders` looks for
#: one by a scan): `library_held` answers no for them, and the keys name them by
#: what they are (a function by its code, a module by its name)
_UNINDEXED = frozenset({_FUNCTION, ModuleType})
#: Class attributes not indexed: functions, and the descriptors a C type or a
#: class's slots make (a third of all class attributes), which the walks key by
#: their class and name or refuse. Properties and static and class methods stay:
#: the walk keys a program's by content, and two of a library's over one getter
#: (numpy's ``MaskedArray.data`` and ``._data``) are told apart only by their
#: identity here (review 137).
_UNHELD = frozenset(
    map(
        id,
        (_FUNCTION, MemberDescriptorType, GetSetDescriptorType, MethodDescriptorType,
         WrapperDescriptorType, ClassMethodDescriptorType),
    )
)  # fmt: skip
#: Types whose instances are no class and whose own class any key names by its
#: name (``library_holders(t, of_type=True)`` is asked of classes no name resolves):
#: most module attributes, indexed by identity only (a third of the index's cost)
_TYPE_SUBCLASS = 1 << 31  # (Py_TPFLAGS_TYPE_SUBCLASS)
_NAMED_TYPES = frozenset(
    map(
        id,
        (_FUNCTION, ModuleType, BuiltinFunctionType, int, float, complex, str, bytes,
         bool, type(None), tuple, list, dict, set, frozenset),
    )
)  # fmt: skip


__all__ = ["holders_index", "library_held", "library_holders", "module_held"]
