"""A served trace's calls: lowered through JAX's own cache with the warnings its
lowering issued (`lower_recorded`), and run, on a new callable's first call,
through JAX's jaxpr-keyed dispatch (`run_python_pjit_wrapper`).

A trace hit hands a recorded jaxpr to a jit object JAX has never seen, whose first
call then takes JAX's slow path: the lowering from JAX's own cache, every argument
and output handled in Python, the executable called from Python, and a C++ fast
path built for a jit object that, re-created each step, is never called again
(bench_jit: three quarters of what a re-created ``jit(grad(checkpoint(mlp)))``
costs over one built once). JAX has a C++ dispatch keyed on the jaxpr itself: how
``jit_p`` runs outside a trace (`_compat.traces.run_by_jaxpr`; `_run_python_pjit`
takes it too under ``jax_debug_key_reuse``). A recorded jaxpr is the same object on
every hit, so from its second served call on, that dispatch runs it from C++.

It runs the same executable on the same arguments; what it skips is only what
JAX's slow path does besides, and each of those keeps the slow path:
* the new callable's own fast path: its first call asks JAX to drop the entry it
  made (`_compat.traces.DROP_ENTRY`), so a callable called again takes the slow
  path once more (its function seen before) and builds its fast path then;
* lowering: only for a jaxpr lowered before, found to hold no state of its own
  (`NO_STATE`), and none of whose lowerings issued a warning (`_WARNED`): a
  lowering a new signature needs still runs, from C++ back into Python;
* per-call options that act in the slow path (PGLE, NaN/Inf checks, key-reuse
  checks, ``jax_no_execution``, distributed debug logging, transfer guards): the slow path
  (`_compat.traces.jaxpr_dispatch_ok`); and check mode (``JAX_PCACHE_CHECK``).
"""

from __future__ import annotations

import functools
import types
import weakref

from pcache import _compat, _memos, _replay, _state

#: the jaxprs of recorded traces whose lowering was read and holds no state of its
#: own (`pcache._jit_seam._stateful`)
NO_STATE: weakref.WeakSet = _memos.memo("jit.no_state", weakref.WeakSet())

#: a lowering (JAX's computation object) -> the warnings it issued
_LOWERING_WARNINGS: weakref.WeakKeyDictionary = _memos.memo(
    "served.lowering_warnings", weakref.WeakKeyDictionary()
)
#: recorded jaxprs one of whose lowerings issued a warning
_WARNED: weakref.WeakSet = _memos.memo("served.warned", weakref.WeakSet())
#: functions a jit object called already (by a served trace or not)
_CALLED: weakref.WeakSet = _memos.memo("served.called", weakref.WeakSet())


def lower_recorded(jaxpr, call):
    """Lower a recorded trace's jaxpr through JAX's own cache (``call``). When JAX's
    cache serves the lowering, it does not run and its warnings (unusable donated
    buffers, ...) are not issued; the new call's own lowering would have issued
    them, so they are issued again, as a cache hit replays them."""
    out, warned = _replay.recorded_call(call)
    if warned:
        _WARNED.add(jaxpr)
    try:
        seen = _LOWERING_WARNINGS.get(out)
        if seen is None or warned:
            _LOWERING_WARNINGS[out] = warned  # lowering ran, and issued them itself
            return out
    except TypeError:  # (not weakly referenceable: the next call lowers it again)
        return out
    _replay.Replay(warnings=seen).on_hit(None)
    return out


def run_python_pjit_wrapper(p, args_flat, fun, args, kwargs):
    """JAX's `_run_python_pjit` (a jit object's slow path), by the jaxpr where the
    call is a served trace's first call of its callable (see the module's doc)."""
    orig = _state.ORIG["run_python"]
    rt = _state.rt
    jaxpr = _compat.traces.params_jaxpr(p)
    if (
        rt is None
        or rt.check_mode
        or jaxpr not in NO_STATE
        or jaxpr in _WARNED
        or not _first_call(fun)
        or not _compat.traces.jaxpr_dispatch_ok(p)
    ):
        return orig(p, args_flat, fun, args, kwargs)
    return _compat.traces.run_by_jaxpr(p, args_flat, lambda: orig(p, args_flat, fun, args, kwargs))


def _first_call(fun) -> bool:
    """Whether ``fun`` is called by a jit object for the first time: only for
    functions and plain partials, which hash and compare by identity (any other
    callable's ``__hash__`` or ``__eq__`` may run the program's code)."""
    if type(fun) is not types.FunctionType and type(fun) is not functools.partial:
        return False
    if fun in _CALLED:
        return False
    _CALLED.add(fun)
    return True


__all__ = ["NO_STATE", "lower_recorded", "run_python_pjit_wrapper"]
