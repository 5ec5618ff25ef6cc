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
from typing import Any

from pcache._memos import memo
from pcache._usercode import is_library_module, module_dict

_HOLDERS: dict = memo("persist.library_holders", {})  # index, modules indexed


def library_held(v: Any, t: type) -> bool:
    """Whether ``v`` (a string, number, bytes, tuple) is the very object a library
    module holds (``FAST = "fast mode!"``, ``AXES = (0, 1)``): library code may
    compare a value with it by identity (review 76). Not those whose identity the
    value decides (CPython's cached small ints, empty and one-character strings)."""
    if t is int:
        if -5 <= v <= 256:
            return False
    elif t in (str, bytes, tuple) and len(v) <= (1 if t is not tuple else 0):
        return False
    return bool(library_holders(v))


def library_holders(v: Any, of_type: bool = False) -> list:
    """Every (module, attribute) of a loaded library module holding ``v`` (``of_type``:
    an instance of class ``v``): from an index of library namespaces, each module
    indexed once when first seen loaded (not a walk of them all per value asked),
    each hit read back."""
    index = _HOLDERS.setdefault("index", {})
    done = _HOLDERS.setdefault("done", {})
    # (modules loaded since: indexed now; one loaded as another was removed is not,
    # and what it holds has no library name: not keyed)
    if _HOLDERS.get("n") != len(sys.modules):
        _HOLDERS["n"] = len(sys.modules)
        for name, m in list(sys.modules.items()):
            if done.get(name) is m:
                continue
            spec = (module_dict(m) or {}).get("__spec__")
            if type(spec) is ModuleSpec and vars(spec).get("_initializing"):
                continue  # (still running its body: indexed when done)
            done[name] = m
            if is_library_module(m):
                for k, x in list(module_dict(m).items()):
                    index.setdefault(id(x), []).append((name, k))
                    index.setdefault(("type", id(type(x))), []).append((name, k))
    found = []
    for name, k in index.get(("type", id(v)) if of_type else id(v), ()):
        d = module_dict(sys.modules.get(name))
        x = d.get(k, _HOLDERS) if d is not None else _HOLDERS
        if (type(x) if of_type else x) is v:
            found.append((name, k))
    return found


__all__ = ["library_held", "library_holders"]
