"""The jit seam: `jax.jit`'s lowering and compilation, served from pcache's tiers.

For `jax.jit`, JAX lowers a ClosedJaxpr in `pxla.lower_sharding_computation`, which
calls `pxla._cached_lowering_to_hlo` (jaxpr -> StableHLO) and later, from
`MeshComputation.compile`, `pxla._cached_compilation` (StableHLO -> executable).
Both are keyed on object identity, so a re-created `jit(grad(f))` misses both.

pcache wraps the two (installed by `pcache._install`):

* `_cached_lowering_to_hlo` (`lowering_wrapper`): compute the key (`_key`). On a
  hit in the memory tier or the store, skip lowering: return a `Prefetched`
  placeholder module that carries the ready executable, and the few other lowering
  outputs, which for a cacheable program are determined by the jaxpr (effects,
  `tuple_args`) or empty (host callbacks, keepalive).
* `_cached_compilation` (`compilation_wrapper`): a `Prefetched` module whose
  compile inputs match what was keyed returns its executable without compiling. A
  real module with a `Pending` key (a miss) is compiled through the runtime's
  single-flight and stored.

Around them: `pjit_lower_wrapper` reuses a hit program's MeshComputation by
content; `lsc_wrapper` and `device_assignment_wrapper` collect what
`_cached_lowering_to_hlo` is not told (the lowering session,
`pcache._lowering_session`). The compile side is `pcache._jit_compile`; what a
lowering hands it, `pcache._jit_handoff`.

Anything unexpected (a placeholder reaching a consumer that wants the real module,
compile inputs that differ from those keyed) makes the placeholder lower for real:
the cache can only cost time, never change the program.
"""

from __future__ import annotations

import dataclasses
import logging
import time

import jax

from pcache import (
    _canon,
    _compat,
    _key,
    _load,
    _lowering_session,
    _memos,
    _replay,
    _served,
    _state,
    _trace,
)
from pcache._errors import CheckError, Uncacheable
from pcache._jit_handoff import Pending, Prefetched, hand_over
from pcache._key import CacheKey, Predicted
from pcache._lowering_session import LowerCtx
from pcache._served import NO_STATE

logger = logging.getLogger("pcache")


class _ProbeResult(Exception):
    """Raised from inside lowering by `fingerprint()` to return the key unlowered."""

    def __init__(self, key: CacheKey) -> None:
        self.key = key


# `_pjit_lower` memo key -> digest of the full key whose memory-tier entry holds the
# MeshComputation (see `pjit_lower_wrapper`). Sound: the memo key is the jaxpr's
# canonical digest (content, revalidated: see _canon._JAXPR_MEMO) and every other
# `_pjit_lower` input by value, the trace context and the other config values.
COMPUTATIONS = _memos.memo("jit_seam.computations", _canon.BoundedMemo(4096))


# ------------------------------------------------------------------ wrappers


def pjit_lower_wrapper(*args, **kwargs):
    """JAX's `_pjit_lower` (keyed on the jaxpr object) keyed on the jaxpr's content.

    After a program has hit once, its MeshComputation (whose compiled executable
    is cached on it) is reused for every later call with an equal canonical jaxpr
    and equal other inputs, skipping `lower_sharding_computation` and building the
    executable wrapper again: the same reuse JAX does for one jaxpr object, with
    identity replaced by the canonical digest (and JAX's own trace context).
    """

    def call():
        return _state.ORIG["pjit_lower"](*args, **kwargs)

    rt = _state.rt
    c = _compat.PjitLowerCall.of(args, kwargs)
    jaxpr = c.jaxpr
    if rt is None or c.pgle_profiler is not None or _lowering_session.probing():
        return call()
    if jaxpr in _trace.RECORDED and not rt.check_mode:
        # A reused trace: this very jaxpr object, whose computation JAX's own cache
        # (the call below) holds, as for any JAX trace-cache hit. Unless its program
        # keeps state of its own: then it serves no other callable from here on.
        out = _served.lower_recorded(jaxpr, call)
        if jaxpr not in NO_STATE and not _stateful(rt, getattr(out, "_hlo", None), jaxpr, ""):
            NO_STATE.add(jaxpr)  # (its module read once)
        return out
    try:
        d = _canon.jaxpr_fingerprint(jaxpr)
        if rt.check_mode:
            _check_same("jaxpr digest", d, _fresh(_canon.jaxpr_fingerprint, jaxpr))
        memo_key = _memo_key(c, d) if d.persistent else None
        digest = None if memo_key is None else COMPUTATIONS.get(memo_key)
    except Exception:  # uncacheable or unhashable: the lowering seam decides and counts
        return call()
    if not d.persistent:  # (outside the try: an error of the lowering is the program's)
        return _call_with_digest(call, jaxpr, d)
    if digest is not None and rt.check_mode:
        # Take the whole lowering path, and check that it arrives at the same key.
        comp = _call_with_digest(call, jaxpr, d)
        hlo = getattr(comp, "_hlo", None)
        if isinstance(hlo, Prefetched):
            _check_same("computation memo", digest, hlo.key.digest)
        return comp
    if digest is not None:
        got = rt.memory_lookup(digest, lambda loaded: _computation_of(loaded, memo_key))
        if got is not None and not _relower_for_warnings(got[0]):
            loaded, (comp, log_args) = got
            loaded.replay.on_hit(log_args)
            return comp
    comp = _call_with_digest(call, jaxpr, d)
    _remember_computation(comp, jaxpr, memo_key)
    return comp


def _memo_key(c: _compat.PjitLowerCall, d: _canon.JaxprDigest) -> tuple:
    """A `_pjit_lower` call by value: its jaxpr's digest, every other input, JAX's
    trace context and the other config values (raises on an unhashable input)."""
    return (
        d.digest,
        c.name,  # JAX's key has it too: module name and argument names in diagnostics
        c.in_shardings,
        c.out_shardings,
        c.in_layouts,
        c.out_layouts,
        tuple(c.donated_invars),
        c.ctx_mesh,
        c.keep_unused,
        c.inline,
        _key.typed_options(c.compiler_options_kvs),
        c.lowering_platforms,
        c.lowering_parameters,
        _compat.trace_context(),
        _key.extra_config_values(),
    )


def _remember_computation(comp, jaxpr, memo_key) -> None:
    """Keep a hit program's MeshComputation with its memory-tier entry, for later
    `_pjit_lower` calls with an equal memo key."""
    hlo = getattr(comp, "_hlo", None)
    # Not with hoisted constants (jax_use_simplified_jaxpr_constants): the computation
    # holds this call's constant arrays (views of user buffers, placed on devices),
    # which a later call with equal content but other buffers must not inherit.
    # Nor with captured constants (closed-over arrays): the computation holds this
    # call's jaxpr, which must not outlive the user's function in pcache's memory.
    if (
        isinstance(hlo, Prefetched)
        and hlo.key.persistent
        and hlo.loaded.computations is not None
        and not comp.const_args
        and not jaxpr.consts
    ):
        if len(hlo.loaded.computations) < 4:
            hlo.loaded.computations[memo_key] = (comp, hlo.log_args)
            COMPUTATIONS.put(memo_key, hlo.key.digest)


def _relower_for_warnings(loaded: _load.Loaded) -> bool:
    """Whether a hit must lower for real instead of replaying its warnings: the
    entry's lowering warned, and lowering's warnings now name source locations or
    the function (`_lowering_warnings_name_sources`), which the key does not
    hold: a replay would name the code of whichever lowering stored the entry."""
    return (
        bool(loaded.replay.warnings)
        and not loaded.host_callbacks  # never lowered again behind the executable's back
        and _lowering_warnings_name_sources()
    )


def _lowering_warnings_name_sources() -> bool:
    """Whether lowering's captured-constant warnings now name source locations or
    the function (a report with frames, or the per-constant warning of simplified
    constants): text that the key, which leaves out debug information, does not
    determine."""
    if _compat.config_value("jax_captured_constants_warn_bytes") < 0:
        return False
    return bool(_compat.config_value("jax_captured_constants_report_frames")) or bool(
        _compat.config_value("jax_use_simplified_jaxpr_constants")
    )


def _computation_of(loaded: _load.Loaded, memo_key) -> tuple | None:
    memo = loaded.computations.get(memo_key) if loaded.computations is not None else None
    return None if memo is None else (loaded, memo)


def _call_with_digest(call, jaxpr, digest):
    with _lowering_session.handing_digest(jaxpr, digest):
        return call()


def lsc_wrapper(*args, **kwargs):
    call = _compat.LscCall.of(args, kwargs)
    with _lowering_session.lowering(call.closed_jaxpr, call.fun_name, call.options):
        return _state.ORIG["lsc"](*args, **kwargs)


def device_assignment_wrapper(*args, **kwargs):
    out = _state.ORIG["devices"](*args, **kwargs)
    _lowering_session.note_device_assignment(out)
    return out


def lowering_wrapper(*args, **kwargs):
    rt, ctx = _state.rt, _lowering_session.current()
    lower = _state.ORIG["lower"]
    if ctx is None and rt is not None:
        try:
            closed_jaxpr = _compat.LoweringCall.of(args, kwargs).closed_jaxpr
            ctx = _lowering_session.adopted(_state.ORIG["lsc"], closed_jaxpr)
        except Exception as exc:  # a speedup only: the HLO-level seam serves it
            rt.error("adopt lowering", exc)
    if ctx is None or (rt is None and not ctx.probe):
        return lower(*args, **kwargs)
    t0 = time.perf_counter()
    try:
        call = _compat.LoweringCall.of(args, kwargs)
        key, predicted = ctx.key(call)
        key = _serializable(key, call, predicted)
    except Uncacheable as exc:
        if ctx.probe:
            raise
        rt.bypass(exc.reason, str(exc))
        return lower(*args, **kwargs)
    except Exception as exc:
        if ctx.probe:  # `pcache.fingerprint`: only ever Uncacheable, with a reason
            raise Uncacheable(f"fingerprint-error:{type(exc).__name__}", str(exc)) from exc
        rt.error("fingerprint", exc)
        rt.bypass("fingerprint-error", repr(exc))
        return lower(*args, **kwargs)
    if ctx.probe:
        raise _ProbeResult(key)
    if rt.check_mode:
        _check_key(ctx, call, key)
    jax.monitoring.record_event_duration_secs(
        "/pcache/fingerprint_time_sec", time.perf_counter() - t0
    )
    if key.relower:
        return _relowered(rt, key, predicted, call, lower, args, kwargs, ctx.fun_name)
    loaded = _lookup(rt, key, predicted, call.backend)
    if loaded is not None:
        return _hit(loaded, key, predicted, call, lower, args, kwargs)
    return _lower_miss(rt, key, predicted, lower, args, kwargs, ctx.fun_name)


def _hit(loaded: _load.Loaded, key, predicted: Predicted, call, lower, args, kwargs):
    """`_cached_lowering_to_hlo`'s result for a hit: a `Prefetched` module."""
    unordered = _compat.unordered_effects(call.closed_jaxpr.effects)
    poly = _compat.shape_poly_state(call.platforms)
    module = Prefetched(loaded, key, predicted, call, (args, kwargs))
    if _relower_for_warnings(loaded):
        # Lower for real: its warnings are issued as JAX issues them (their text
        # names this function's source), and its module is the one materialized.
        module._module = lower(*args, **kwargs)[0]
    else:
        # Outside the key's try: a replayed warning that the user's filters turn
        # into an error raises here, as it would have from the lowering.
        loaded.replay.on_hit(module.log_args)
    return _compat.lowering_result(
        module,
        list(loaded.keepalive),
        list(loaded.host_callbacks),
        unordered,
        list(predicted.ordered),
        predicted.tuple_args,
        poly,
    )


def _lower_miss(rt, key: CacheKey, predicted: Predicted, lower, args, kwargs, fun_name):
    """Lower a miss for real, and hand its module's compile the key to store it by."""
    if logger.isEnabledFor(logging.DEBUG) or rt.explain:
        _log_miss(rt, key, fun_name)
    try:
        out, replay = _replay.recorded_lowering(lower, args, kwargs)
    except _replay.LoweringFailed as exc:  # lowering succeeded; reading its record failed
        rt.error("lowering record", exc.__cause__)
        return exc.out
    module, keepalive, host_callbacks = out[0], out[1], out[2]
    if _stateful(rt, module, _compat.LoweringCall.of(args, kwargs), fun_name):
        return out
    if keepalive and key.persistent:
        # Values the executable must keep alive, from a lowering rule: nothing a
        # stored entry could hold. Never store such a program.
        rt.bypass("keepalive", f"{fun_name}: the lowering registered keepalive values")
        return out
    if host_callbacks and key.persistent:
        # The canonical form marks every host-callback primitive it knows `relower`.
        # Reaching here means a primitive registered callbacks some other way: a hit
        # would skip the lowering that registers them. Never store such a program.
        rt.bypass("host-callback", f"{fun_name}: unexpected host callbacks in lowering")
        return out
    hand_over(
        module, Pending(key, predicted, fun_name, tuple(keepalive), tuple(host_callbacks), replay)
    )
    return out


def _stateful(rt, module, call, fun_name: str) -> bool:
    """Whether ``module`` holds an op whose executable keeps state of its own
    (``stablehlo.rng`` from a user rule: review 29): then it is compiled as JAX
    would, never served or stored, and its trace never served to another callable."""
    if type(module) is Prefetched:
        return False  # served from the cache: what holds state is never stored there
    try:
        op = "unreadable-module" if module is None else _compat.stateful_op(module)
    except Exception as exc:
        rt.error("stateful ops", exc)
        op = "unreadable-module"
    if op is None:
        return False
    rt.bypass(f"stateful:{op}", fun_name)
    _trace.MEMO.drop_jaxpr(getattr(call, "closed_jaxpr", call))
    return True


def _serializable(key: CacheKey, call: _compat.LoweringCall, predicted: Predicted) -> CacheKey:
    """``key``, valid in this process only when XLA cannot serialize the program's
    executable without crashing (`unserializable_program`: ordered effects
    on several devices): compiled into the memory tier, never stored."""
    if not key.persistent:
        return key
    why = unserializable_program(
        predicted.ordered, call.num_devices, call.in_avals, call.closed_jaxpr.out_avals
    )
    return key if why is None else dataclasses.replace(key, persistent=False, local_why=why)


# XLA cannot serialize every executable it compiles. On jaxlib 0.10.x (and the XLA
# it is built from) `PjRtLoadedExecutable::Serialize` writes one spec per parameter
# (`PjRtExecutable::CommonMetadata::Serialize`): when the executable's parameter
# layouts cannot be read (`GetParameterLayouts` is UNIMPLEMENTED for a token or an
# opaque parameter) it counts the parameters by their shardings and writes a null
# layout for each, which it then dereferences: SIGSEGV, the whole process. The
# shardings exist only for an SPMD-partitioned executable (more than one device),
# so a one-device program with tokens serializes, and a multi-device one crashes.
# JAX gives an executable token parameters for its ordered effects (one per effect:
# `io_callback(ordered=True)` is the one JAX allows on several devices, through
# `effects.shardable_ordered_effects`), and for token-typed arguments. JAX's own
# persistent cache never meets them: it refuses any compile with host callbacks.
#
# `unserializable_program` names the class before anything is compiled (from what
# the jaxpr says); `_compat.serialize` checks the compiled executable itself, the
# same way the crashing code decides, and refuses instead of crashing: fail closed.


def unserializable_program(ordered_effects, num_devices: int, in_avals, out_avals) -> str | None:
    """Why XLA would crash serializing the executable of a jit program with these
    ordered effects, device count and avals (see above), or None."""
    if num_devices <= 1:
        return None
    if ordered_effects:
        return _compat.UNSERIALIZABLE_ORDERED
    if any(isinstance(a, _compat.AbstractToken) for a in (*in_avals, *out_avals)):
        return _compat.UNSERIALIZABLE_TOKENS
    return None


def _lookup(rt, key: CacheKey, predicted: Predicted, backend):
    """The tiers' executable for ``key`` (starting this program's preload on its
    first persistent lookup), or None; a failure of the cache is a miss."""
    try:
        ws = _load.working_set_name(backend) if key.persistent else None
        if ws is not None and rt.preload_pending(ws):
            try:
                rt.start_preload(ws, key.digest, *_load.preload_fns(backend, predicted.env))
            except Exception as exc:  # a speedup only: never let it cost the lookup
                rt.background_error("preload", exc)
        return rt.lookup(
            key,
            lambda raw, replay: _load.load_entry(raw, replay, backend, predicted),
            lambda signature: signature == _load.load_signature(predicted),
            working_set=ws,
            host_class=_load.host_class(backend, predicted.device_list),
        )
    except CheckError:
        raise
    except Exception as exc:  # the cache must never break the program: compile instead
        rt.error("lookup", exc)
        return None


def _relowered(rt, key: CacheKey, predicted, call, lower, args, kwargs, fun_name):
    """A `CacheKey.relower` program (host callbacks, or a `mlir.lower_fun` rule over
    code outside JAX): lower it as JAX would, complete the key with the module, and
    hand JAX the stored executable for that module bound to this lowering's
    callbacks; on a miss, compile that module through the runtime as any miss."""
    try:
        out, replay = _replay.recorded_lowering(lower, args, kwargs)
    except _replay.LoweringFailed as exc:  # lowering succeeded; reading its record failed
        rt.error("lowering record", exc.__cause__)
        return exc.out
    module, keepalive, host_callbacks = out[0], out[1], out[2]
    if _stateful(rt, module, call, fun_name):
        return out
    try:
        key = _key.with_module(key, _compat.module_digest(module))
    except Exception as exc:  # compiled as JAX would, uncached
        rt.error("module digest", exc)
        return out
    loaded = _lookup(rt, key, predicted, call.backend)
    if loaded is not None:
        try:
            bound = _load.bind(loaded, out, call.backend, predicted)
        except CheckError:
            raise
        except Exception as exc:  # the cache must never break the program: compile instead
            rt.error("bind host callbacks", exc)
            return out
        if bound is not None:
            return (Prefetched(bound, key, predicted, call, (args, kwargs)), *out[1:])
        rt.bypass("host-callback-count", f"{fun_name}: the stored executable has other callbacks")
        return out
    if logger.isEnabledFor(logging.DEBUG) or rt.explain:
        _log_miss(rt, key, fun_name)
    if keepalive and key.persistent:
        rt.bypass("keepalive", f"{fun_name}: the lowering registered keepalive values")
        return out
    hand_over(
        module, Pending(key, predicted, fun_name, tuple(keepalive), tuple(host_callbacks), replay)
    )
    return out


def stablehlo_wrapper(self):
    hlo = self._hlo
    if isinstance(hlo, Prefetched):
        return hlo.materialize()
    return hlo


# ------------------------------------------------------------------ helpers


def _fresh(fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` with every memo off: computed from scratch."""
    with _canon.fresh():
        return fn(*args, **kwargs)


def _check_same(what: str, memoized, fresh) -> None:
    if memoized != fresh:
        raise CheckError(f"pcache check: memoized {what} {memoized!r} != fresh {fresh!r}")


def _check_key(ctx: LowerCtx, call: _compat.LoweringCall, key: CacheKey) -> None:
    """``JAX_PCACHE_CHECK``: the key, computed again with no memo, is the same."""
    fresh, predicted = _fresh(ctx.unmemoized().key, call)
    fresh = _serializable(fresh, call, predicted)
    if fresh.parts != key.parts or fresh.persistent != key.persistent:
        diff = [n for (n, a), (_, b) in zip(key.parts, fresh.parts, strict=False) if a != b]
        raise CheckError(
            f"pcache check: the memoized key of {ctx.fun_name} differs from a fresh one "
            f"in {diff or 'its parts'} (persistent {key.persistent} vs {fresh.persistent})"
        )


def _log_miss(rt, key: CacheKey, fun_name: str) -> None:
    logger.debug("pcache miss %s for %s; key parts:\n%s", key.digest[:12], fun_name, key.describe())
    if rt.explain:
        from pcache import _explain

        logger.warning("%s", _explain.explain_miss(rt, key, fun_name))


# ------------------------------------------------------------- fingerprint API


def fingerprint(fun, args, kwargs) -> CacheKey:
    """The key `jax.jit(fun)(*args, **kwargs)` would be cached under, without
    lowering (the jit seam must be installed)."""
    with _lowering_session.probe():
        try:
            _compat.lower_for_fingerprint(fun, args, kwargs, _compat.current("lsc"))
        except _ProbeResult as res:
            return res.key
    raise Uncacheable("not-lowered", "JAX did not reach the lowering seam for this call")
