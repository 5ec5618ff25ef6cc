"""Whether Python JAX runs after a trace reaches state the program can change.

JAX runs some of a trace's Python later, when the program is transformed: a
`custom_jvp`'s jvp thunk under `grad`/`jvp`, a `custom_vmap` rule under `vmap`, a
`custom_vjp`'s bwd. It caches what they return on the jaxpr (``pe._memoize``) or
keyed by it (`ad.jvp_jaxpr`, `batching.batch_jaxpr`). A reused trace shares that
jaxpr, so a result computed while the program's state was another (a numpy array a
rule holds, a `custom_jvp` object whose ``fun`` was reassigned) would be handed to
a later, equal callable whose stock trace would run the rule afresh (review 49).
So a trace is not recorded when that later Python reaches a mutable object the
key's walks met (`mutable`): what the key compares now is not what the rule reads
then. JAX's own bookkeeping (the avals lists, stores and trace a thunk closes
over) is never met by the key, and a library's own `custom_jvp` object (``relu``)
changed is monkeypatching, not seen. An instance of a library class the program
made (keyed by its attributes since phase 3) is the program's state.
"""

from __future__ import annotations

import collections
import functools
import sys
import types
from typing import Any

import numpy as np

from pcache import _compat
from pcache._holders import library_holders
from pcache._introspect import Override, cdict, cell_bound, inst_dict, is_a, mro
from pcache._usercode import is_library_type, module_dict

_MUTABLE = (list, dict, set, bytearray, np.ndarray)
_PARTIAL_FIELDS = tuple(functools.partial.__dict__[n].__get__ for n in ("func", "args", "keywords"))
_BUDGET = 20000  # objects looked at per recording: beyond, taken as reaching state


def mutable(objects: list) -> dict:
    """The objects of a walk the program can change in place, by id."""
    return {id(o): o for o in objects if _changeable(o)}


def _changeable(o: Any) -> bool:
    t = type(o)
    if t in _MUTABLE or is_a(o, _MUTABLE):
        return True
    if is_a(o, _compat.CUSTOM_DERIVATIVE_TYPES):
        return not _library_held(o)
    if is_a(o, functools.partial):
        return True  # (``__setstate__`` rebinds its fields in place: review 51)
    if is_a(o, (type, types.ModuleType, types.FunctionType)):
        return False
    # (a library class's instance the program made: keyed by its attributes, which
    # the program can set: review 115)
    return not is_library_type(t) or _made(o)


def _made(o: Any) -> bool:
    """An instance with attributes of its own (a dict) that no library module holds."""
    try:
        d = inst_dict(o)
    except Override:
        return True
    return d is not None and not library_holders(o)


def _library_held(o: Any) -> bool:
    """A library module's own object (``jax.nn.relu``), under its own names."""
    d = _own(o)
    mod = module_dict(sys.modules.get(_str(d.get("__module__"))))
    return mod is not None and mod.get(_str(d.get("__name__"))) is o


def _own(o: Any) -> dict:
    try:
        return inst_dict(o) or {}
    except Override:
        return {}


def _str(v: Any) -> str:
    return v if type(v) is str else ""


def array_consts(closed_jaxpr: Any) -> bool:
    """Whether a jaxpr holds a numpy array as a constant (a program's, changeable in
    place: JAX's later Python may bake its then value into what it caches)."""
    return any(is_a(c, np.ndarray) for c in getattr(closed_jaxpr, "consts", ()))


def reaches(late: tuple, met: dict) -> bool:
    """Whether any of ``late`` (callables JAX runs after the trace) reaches one of
    ``met`` through closures, defaults, partials, bound methods, containers, JAX's
    wrapped functions and custom-rule objects."""
    todo = list(late)
    seen: set[int] = set()
    while todo:
        o = todo.pop()
        if id(o) in seen:
            continue
        seen.add(id(o))
        if len(seen) > _BUDGET:
            return True
        if id(o) in met and met[id(o)] is o:
            return True
        todo.extend(_parts(o))
    return False


def _parts(o: Any) -> list:
    t = type(o)
    if t is types.FunctionType:
        out = [c.cell_contents for c in o.__closure__ or () if cell_bound(c)]
        return out + list(o.__defaults__ or ()) + list((o.__kwdefaults__ or {}).values())
    if is_a(o, functools.partial):  # (its fields as partial.__call__ reads them)
        func, args, keywords = (f(o) for f in _PARTIAL_FIELDS)
        return [func, *args, *keywords.values(), *_own(o).values()]
    if t is types.MethodType:
        return [o.__func__, o.__self__]
    if t in (tuple, list, set, frozenset):
        return list(o)
    if t is dict or t is collections.OrderedDict or t is collections.defaultdict:
        return list(dict.values(o))  # (its storage: what ``o[k]`` reads)
    if hasattr(o, "f_transformed") and hasattr(o, "f") and is_library_type(t):
        return [o.f, o.f_transformed]  # JAX's WrappedFun
    if is_a(o, _compat.CUSTOM_DERIVATIVE_TYPES) or not is_library_type(t) or callable(o):
        # (a library callable may hold the program's: custom_vmap's rule holds the
        # user's function)
        return [*_own(o).values(), *_slots(o)]
    if _made(o):  # (a library class's instance the program made, and what it holds)
        return [*_own(o).values(), *_slots(o)]
    return []  # library values and JAX's own objects: not the program's


def _slots(o: Any) -> list:
    out = []
    for k in mro(type(o)):
        slots = cdict(k).get("__slots__", ())
        for name in (slots,) if type(slots) is str else slots:
            if type(name) is str and name not in ("__dict__", "__weakref__"):
                d = cdict(k).get(name)
                if type(d) is types.MemberDescriptorType:
                    try:
                        out.append(d.__get__(o, type(o)))
                    except AttributeError:
                        pass
    return out


__all__ = ["array_consts", "mutable", "reaches"]
