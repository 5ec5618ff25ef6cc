"""The jit seam's compile side: `pxla._cached_compilation`, served from the tiers.

A `Prefetched` placeholder module whose compile inputs match what was keyed returns
its executable without compiling. A real module with a `Pending` key (a miss) is
compiled through the runtime's single-flight and stored. Compile inputs other than
those keyed (AOT ``compiler_options``, another device assignment) re-key the
program; anything else pcache does not key compiles as JAX would, uncached.
"""

from __future__ import annotations

import dataclasses
import logging
import time

from pcache import _compat, _key, _load, _state
from pcache._errors import Uncacheable
from pcache._hlo_seam import entry_meta, hlo_seam_off
from pcache._jit_handoff import Pending, Prefetched, same_objects, take
from pcache._key import CacheKey, Predicted


def compilation_wrapper(computation, *rest):
    """`_cached_compilation`, on any line (`_compat.CompileCall` names its inputs)."""

    def call_orig(comp):
        return _state.ORIG["compile"](comp, *rest)

    call = _compat.CompileCall.of(rest)
    if not call.plain:
        # Not the plain SPMD compile a key predicts (0.9: jit-of-pmap, auto-SPMD):
        # compile the real module, uncached.
        keyed = isinstance(computation, Prefetched)
        if keyed:
            computation = computation.materialize()
        keyed = take(computation) is not None or keyed
        rt = _state.rt
        if keyed and rt is not None:
            rt.bypass("compile-inputs", f"{call.name}: 0.9 non-SPMD or auto-SPMD compile")
        return call_orig(computation)
    return _compile(computation, call, call_orig)


def _same(call: _compat.CompileCall, predicted: Predicted, callbacks) -> bool:
    """Whether ``call`` compiles with the inputs a key predicted."""
    return (
        same_objects(call.host_callbacks, callbacks)
        and call.pgle_profiler is None
        and predicted.matches(call)
    )


def _rekeyed(call: _compat.CompileCall, key: CacheKey) -> CacheKey:
    """``key`` with ``call``'s compile inputs instead of those it predicted."""
    return _key.with_compile_parts(
        key,
        _key.compile_parts(
            call.tuple_args,
            call.allow_in,
            call.allow_out,
            call.device_list,
            call.compiler_options_kvs,
        ),
    )


def _compile(computation, call: _compat.CompileCall, call_orig):
    t0 = time.time()
    if isinstance(computation, Prefetched):
        if _same(call, computation.predicted, computation.host_callbacks):
            # The record JAX's `_cached_compilation` logs around its compile (and, on
            # a JAX persistent-cache hit, around the cache read): logged, not timed as
            # a backend compile (no monitoring event: no compile happened).
            _log_finished_compile(call.name, t0)
            return computation.executable
        # AOT `.compile(compiler_options=...)` or another device assignment:
        # not what was keyed. Lower for real and take the miss path below.
        pending = Pending(
            _rekeyed(call, computation.key),
            # Only these inputs: no environment hash, so no preload parameters
            # (a preload loads with the options of the lookup that keyed it).
            dataclasses.replace(computation.predicted.with_call(call), env=None, ordered=()),
            call.name,
            computation.keepalive,
            computation.host_callbacks,
            computation.loaded.replay,
        )
        computation = computation.materialize()
    else:
        pending = take(computation)
        if pending is not None and not _same(call, pending.predicted, pending.host_callbacks):
            pending = dataclasses.replace(
                pending,
                key=_rekeyed(call, pending.key),
                predicted=pending.predicted.with_call(call),
            )
    rt = _state.rt
    if pending is None or rt is None or call.pgle_profiler is not None:
        return call_orig(computation)
    if not same_objects(call.host_callbacks, pending.host_callbacks):
        return call_orig(computation)
    return _compile_miss(rt, computation, call, call_orig, pending)


def _compile_miss(rt, computation, call: _compat.CompileCall, call_orig, pending: Pending):
    """Compile a keyed module through the runtime (or take what another thread or
    process stored under its key), and bind this lowering's host callbacks."""
    key, predicted, backend = pending.key, pending.predicted, call.backend
    meta = entry_meta(backend, call.device_list, pending.fun_name)
    meta["extra"]["replay"] = pending.replay.to_json()
    ws, cls = None, ""
    try:
        cls = _load.host_class(backend, call.device_list)
        params = _load.load_params(backend, predicted)
        if params is not None:
            meta["extra"]["load"] = params
        ws = _load.working_set_name(backend) if key.persistent else None
    except Exception as exc:  # preloading is a speedup: never let it cost the compile
        rt.background_error("preload parameters", exc)
    loaded = rt.compile_through(
        key,
        _compile_fn(rt, computation, call_orig, pending, backend),
        lambda raw, replay: _load.load_entry(raw, replay, backend, predicted),
        meta,
        lambda signature: signature == _load.load_signature(predicted),
        ws,
        cls,
    )
    if bool(loaded.replay.host_callbacks) != bool(pending.host_callbacks):
        rt.bypass("host-callback-module", f"{call.name}: stored with other host callbacks")
        return call_orig(computation)
    if pending.host_callbacks and not same_objects(loaded.host_callbacks, pending.host_callbacks):
        # Compiled by another thread or process, bound to its callbacks (or to none
        # yet): bind this lowering's.
        try:
            bound = _load.bind(
                loaded, (computation, pending.keepalive, pending.host_callbacks), backend, predicted
            )
        except Exception as exc:
            rt.error("bind host callbacks", exc)
            bound = None
        if bound is None:
            rt.bypass("host-callback-module", f"{call.name}: stored from another module")
            return call_orig(computation)
        loaded = bound
    return loaded.executable


def _compile_fn(rt, computation, call_orig, pending: Pending, backend):
    """What the runtime runs on a miss: compile ``computation``, and its bytes."""
    key = pending.key

    def compile_fn():
        from pcache._cache import Compiled

        t0 = time.perf_counter()
        with hlo_seam_off():
            exe = call_orig(computation)
        secs = time.perf_counter() - t0
        raw = None
        # A callback program's bytes are kept even for the memory tier: every hit
        # binds them to its own lowering's callbacks.
        if key.persistent or pending.host_callbacks:
            try:
                raw = _compat.serialize(exe, backend)
            except Uncacheable as exc:  # XLA would crash serializing it: memory tier only
                if key.persistent:
                    rt.nonpersistent(
                        dataclasses.replace(key, persistent=False, local_why=exc.reason)
                    )
            except Exception as exc:  # some backends cannot serialize: memory tier only
                rt.error("serialize", exc)
        module = None if key.persistent and not pending.host_callbacks else computation
        exe = _load.loaded(
            exe, pending.keepalive, pending.host_callbacks, module, pending.replay, raw
        )
        if pending.host_callbacks:
            # The memory tier keeps the bytes only: every hit binds its own callbacks,
            # and this call's (with what they close over) are not kept alive.
            if raw is None:  # nothing to bind another call's callbacks to
                return Compiled(exe, raw, secs, keep_in_memory=False)
            return Compiled(exe, raw, secs, memory_value=_load.unbound(raw, pending.replay))
        return Compiled(exe, raw, secs)

    return compile_fn


def _log_finished_compile(name, t0: float) -> None:
    priority = logging.WARNING if _compat.log_compiles() else logging.DEBUG
    if _compat.dispatch_logger.isEnabledFor(priority):
        _compat.dispatch_logger.log(
            priority, f"Finished XLA compilation of {name} in {time.time() - t0:.9f} sec"
        )
