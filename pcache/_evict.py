"""What JAX's identity caches may hold of a callable trace reuse keys, dropped before
a trace pcache will record.

JAX keeps traces in caches keyed on a function (`weakref_lru_cache` by weak
reference, `lu.cache` by ``fun.f``; `_compat.evict_traces`): a cond or scan body,
a checkpointed function, an inner jit. A trace JAX made of one in another state
than the one pcache keys (an eager ``lax.cond``, a call pcache could not key, the
state changed and changed back), or of another object that compares equal (JAX's
caches match weak references by ``==``: ``A(0.0) == A(-0.0)``, ``obj.f == obj.f``),
would be taken into the trace being recorded and served to new, equal callables.
So before that trace every function, body and callable the key's walks met is
dropped from those caches, and so is every cached function that compares by value
(reviews 20-22).
"""

from __future__ import annotations

import functools
import types
from typing import Any

from pcache import _compat, _state
from pcache._introspect import cdict, mro, type_ids
from pcache._walk import Walker


def evict_walked(fun: Any, *walkers: Walker) -> None:
    """Drop JAX's traces of every function, body and callable the walks met: JAX's
    identity caches may hold one made in a state pcache never saw (an eager
    ``lax.cond``, an unkeyed call, the state changed back), which a recording would
    hand to new, equal callables. (The call's own `_infer_params_cached` entry stays.)"""
    fs = {id(f): f for wk in walkers for f in [f for _, _, f, _ in wk.funcs] + wk.bodies}
    # (and a frozen dataclass with a ``__call__`` as a scan body: by that object)
    fs.update((id(o), o) for wk in walkers for o in wk.keep if callable(o))
    spare = (_state.ORIG.get("infer_params"), fun)
    held, blind = _compat.cached_functions()
    if blind:  # caches whose keys cannot be read: every walked function, blindly
        _compat.evict_traces(fs.values(), spare=spare, evictors=blind)
    # (one that compares by value may match a key it is not: blindly, everywhere)
    _compat.evict_traces([f for f in fs.values() if not identity_eq(type(f))], spare=spare)
    # The caches hold far fewer functions than the walks meet (library code, mostly):
    # only those held are evicted (the evictor matches a weak reference by ``==``,
    # as listing its referent here does). And every function JAX holds a trace of
    # that compares by value (a bound method, a dataclass with a ``__call__``): an
    # equal one the trace makes (``obj.f``, ``A(0.0)`` for ``A(-0.0)``) would be
    # handed that trace (review 22).
    done = set()
    for cache, evict, o in held:
        if o is fun and cache is spare[0]:
            continue
        if (id(o) in fs or not identity_eq(type(o))) and (k := (id(cache), id(o))) not in done:
            done.add(k)
            evict(o)


IDENTITY_EQ = type_ids((types.FunctionType, types.BuiltinFunctionType, functools.partial))


def identity_eq(t: type) -> bool:
    """Whether ``t``'s instances compare by identity (no class of its MRO but
    ``object`` defines ``__eq__``), read as the interpreter holds the classes."""
    if id(t) in IDENTITY_EQ:
        return True
    return all(k is object or "__eq__" not in cdict(k) for k in mro(t))


__all__ = ["evict_walked", "identity_eq"]
