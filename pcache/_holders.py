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
from importlib.machinery import ModuleSpec
from types import FunctionType as _FUNCTION
from types import ModuleType
from typing import Any

from pcache._dictwatch import Watch
from pcache._introspect import cdict, is_a, items
from pcache._memos import memo
from pcache._usercode import is_library_module, module_dict

_HOLDERS: dict = memo("persist.library_holders", {})  # index, modules indexed


def library_held(v: Any, t: type) -> bool:
    """Whether ``v`` is the very object a library holds, as a module attribute or a
    class attribute of a class a library module holds (``FAST = "fast mode!"``,
    ``Mode.FAST``): library code may compare a value with it by identity (reviews 76,
    79; an item of a library's container, ``MODES["fast"]``, is not seen). Not those
    whose identity the value decides (CPython's cached small ints, empty and
    one-character strings), nor functions, classes and modules (keyed by identity)."""
    holders = _index().get(id(v))
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


def library_holders(v: Any, of_type: bool = False) -> list:
    """Every (module, attribute or ``Class.attribute``) of a loaded library module
    holding ``v`` (``of_type``: an instance of class ``v``, as a module attribute),
    each read back."""
    key = ("type", id(v)) if of_type else id(v)
    return [h for h in _index().get(key, ()) if _holds(h, v, of_type)]


def _holds(h: tuple, v: Any, of_type: bool = False) -> bool:
    d = module_dict(sys.modules.get(h[0]))
    name, _, attr = h[1].partition(".")
    x = d.get(name, _HOLDERS) if d is not None else _HOLDERS
    if attr:
        x = cdict(x).get(attr, _HOLDERS) if is_a(x, type) else _HOLDERS
    return (type(x) if of_type else x) is v


def _index() -> dict:
    """id -> holders, each library module indexed once when first seen loaded (not
    a walk of them all per value asked), looked for again whenever ``sys.modules``
    was written (a module loaded as another was removed: review 89)."""
    watch = _HOLDERS.get("watch")
    if watch is not None and watch.unchanged((sys.modules,)):
        return _HOLDERS["index"]
    index = _HOLDERS.setdefault("index", {})
    done = _HOLDERS.setdefault("done", {})
    watch = _HOLDERS["watch"] = Watch()
    watch.unchanged((sys.modules,))
    for name, m in items(sys.modules):
        if done.get(name) is m:
            continue
        spec = (module_dict(m) or {}).get("__spec__")
        if type(spec) is ModuleSpec and vars(spec).get("_initializing"):
            _HOLDERS.pop("watch", None)  # (indexed when done: looked for again next time)
            continue  # (still running its body)
        done[name] = m
        if not is_library_module(m):
            continue
        for k, x in items(module_dict(m)):
            if type(k) is not str:
                continue
            index.setdefault(id(x), []).append((name, k))
            index.setdefault(("type", id(type(x))), []).append((name, k))
            if is_a(x, type):
                for a, y in items(cdict(x)):
                    if type(a) is str and not a.startswith("__"):  # (not its bookkeeping)
                        index.setdefault(id(y), []).append((name, f"{k}.{a}"))
    return index


__all__ = ["library_held", "library_holders"]
