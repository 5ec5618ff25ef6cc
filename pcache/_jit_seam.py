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
`_cached_lowering_to_hlo` is not told (`LowerCtx`).

Anything unexpected (a placeholder reaching a consumer that wants the real module,
compile inputs that differ from those keyed) makes the placeholder lower for real:
the cache can only cost time, never change the program.
"""

from __future__ import annotations

import contextvars
import dataclasses
import logging
import threading
import time
import weakref

import jax

from pcache import _canon, _compat, _key, _load, _memos, _replay, _state, _trace
from pcache._errors import CheckError, Uncacheable
from pcache._hlo_seam import entry_meta, hlo_seam_off
from pcache._key import CacheKey, Predicted

logger = logging.getLogger("pcache")


# ------------------------------------------------------------ per-call state


class LowerCtx:
    """What `lower_sharding_computation` knows that `_cached_lowering_to_hlo` is not
    told: set by `lsc_wrapper`, completed by `device_assignment_wrapper` (the one
    mutable record here; it lives for one lowering, in a context variable)."""

    __slots__ = (
        "jaxpr",
        "jaxpr_digest",
        "keep_unused",
        "compiler_options_kvs",
        "lowering_platforms",
        "pgle_profiler",
        "fun_name",
        "device_list",
        "backend",
        "probe",
    )

    def __init__(
        self,
        jaxpr,
        keep_unused,
        fun_name,
        compiler_options_kvs,
        lowering_platforms,
        pgle_profiler,
        probe,
    ):
        self.jaxpr = jaxpr
        self.jaxpr_digest = None
        self.keep_unused = keep_unused
        self.fun_name = fun_name
        self.compiler_options_kvs = compiler_options_kvs
        self.lowering_platforms = lowering_platforms
        self.pgle_profiler = pgle_profiler
        self.device_list = None
        self.backend = None
        self.probe = probe

    def digest(self) -> _canon.JaxprDigest:
        """The digest of the jaxpr `lower_sharding_computation` was given (before
        JAX's DCE and ref discharge, which are deterministic functions of it and of
        the keyed `keep_unused`). Computed once per lowering: `pjit_lower_wrapper`
        hands over the digest it already took for its own memo."""
        if self.jaxpr_digest is None:
            self.jaxpr_digest = _canon.jaxpr_fingerprint(self.jaxpr)
        return self.jaxpr_digest

    def key(self, call: _compat.LoweringCall) -> tuple[CacheKey, Predicted]:
        return _key.lowering_key(
            call,
            jaxpr_digest=self.digest,
            keep_unused=self.keep_unused,
            device_list=self.device_list,
            compiler_options_kvs=self.compiler_options_kvs,
            pgle_profiler=self.pgle_profiler,
        )


_LSC_CTX: contextvars.ContextVar[LowerCtx | None] = contextvars.ContextVar(
    "pcache_lsc", default=None
)
_PROBE: contextvars.ContextVar[bool] = contextvars.ContextVar("pcache_probe", default=False)
# (jaxpr, its JaxprDigest) from `pjit_lower_wrapper` to the lowering it calls.
_PRE_DIGEST: contextvars.ContextVar = contextvars.ContextVar("pcache_pre_digest", default=None)


class _ProbeResult(Exception):
    """Raised from inside lowering by `fingerprint()` to return the key unlowered."""

    def __init__(self, key: CacheKey) -> None:
        self.key = key


class Prefetched:
    """Stands in for the StableHLO module when the executable came from the cache.

    Holds what is needed to lower for real if anything asks for the module.
    """

    def __init__(self, loaded: _load.Loaded, key, predicted: Predicted, call, lower_args):
        self.loaded = loaded
        self.executable = loaded.executable
        self.host_callbacks = loaded.host_callbacks
        self.keepalive = loaded.keepalive
        self.key = key
        self.predicted = predicted
        self._lower = lower_args
        # module name, in_avals, in_shardings: what the `jax_log_compiles` record names
        self.log_args = (call.module_name, call.in_avals, call.sem_in.shardings)
        # A callback program must never be re-lowered behind the executable's back:
        # re-lowering registers new callbacks. Reuse the module it was compiled from.
        self._module = loaded.module

    def materialize(self):
        if self._module is None:
            args, kwargs = self._lower
            self._module = _state.ORIG["lower"](*args, **kwargs)[0]
        return self._module


@dataclasses.dataclass(frozen=True)
class Pending:
    """What a miss's lowering hands the compile of its module."""

    key: CacheKey
    predicted: Predicted  # the compile inputs the key assumed
    fun_name: str
    keepalive: tuple
    host_callbacks: tuple
    replay: _replay.Replay


# Real modules lowered on a miss -> their Pending.
# Keyed by the module object's identity (weakly: the entry dies with the module);
# a module is immutable once lowered, and an entry is popped by its one compile.
_PENDING: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_PENDING_LOCK = threading.Lock()

# `_pjit_lower` memo key -> digest of the full key whose memory-tier entry holds the
# MeshComputation (see `pjit_lower_wrapper`). Sound: the memo key is the jaxpr's
# canonical digest (content, revalidated: see _canon._JAXPR_MEMO) and every other
# `_pjit_lower` input by value, the trace context and the other config values.
COMPUTATIONS = _memos.memo("jit_seam.computations", _canon.BoundedMemo(4096))


# ------------------------------------------------------------------ wrappers


def pjit_lower_wrapper(
    jaxpr,
    in_shardings,
    out_shardings,
    in_layouts,
    out_layouts,
    donated_invars,
    ctx_mesh,
    name,
    keep_unused,
    inline,
    compiler_options_kvs,
    *,
    lowering_platforms,
    lowering_parameters,
    pgle_profiler,
):
    """JAX's `_pjit_lower` (keyed on the jaxpr object) keyed on the jaxpr's content.

    After a program has hit once, its MeshComputation (whose compiled executable
    is cached on it) is reused for every later call with an equal canonical jaxpr
    and equal other inputs, skipping `lower_sharding_computation` and building the
    executable wrapper again: the same reuse JAX does for one jaxpr object, with
    identity replaced by the canonical digest (and JAX's own trace context).
    """

    def call():
        return _state.ORIG["pjit_lower"](
            jaxpr,
            in_shardings,
            out_shardings,
            in_layouts,
            out_layouts,
            donated_invars,
            ctx_mesh,
            name,
            keep_unused,
            inline,
            compiler_options_kvs,
            lowering_platforms=lowering_platforms,
            lowering_parameters=lowering_parameters,
            pgle_profiler=pgle_profiler,
        )

    rt = _state.rt
    if rt is None or pgle_profiler is not None or _PROBE.get():
        return call()
    if jaxpr in _trace.RECORDED and not rt.check_mode:
        # A reused trace: this very jaxpr object, whose computation JAX's own cache
        # (the call below) holds, as for any JAX trace-cache hit.
        return _trace.lower_recorded(jaxpr, call)
    try:
        d = _canon.jaxpr_fingerprint(jaxpr)
        if rt.check_mode:
            _check_same("jaxpr digest", d, _fresh(_canon.jaxpr_fingerprint, jaxpr))
        if not d.persistent:
            return _call_with_digest(call, jaxpr, d)
        memo_key = (
            d.digest,
            name,  # JAX's key has it too: module name and argument names in diagnostics
            in_shardings,
            out_shardings,
            in_layouts,
            out_layouts,
            tuple(donated_invars),
            ctx_mesh,
            keep_unused,
            inline,
            _key.typed_options(compiler_options_kvs),
            lowering_platforms,
            lowering_parameters,
            _compat.trace_context(),
            _key.extra_config_values(),
        )
        digest = COMPUTATIONS.get(memo_key)
    except Exception:  # uncacheable or unhashable: the lowering seam decides and counts
        return call()
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
    return comp


def _relower_for_warnings(loaded: _load.Loaded) -> bool:
    """Whether a hit must lower for real instead of replaying its warnings: the
    entry's lowering warned, and lowering's warnings now name source locations or
    the function (`_compat.lowering_warnings_name_sources`), which the key does not
    hold: a replay would name the code of whichever lowering stored the entry."""
    return (
        bool(loaded.replay.warnings)
        and not loaded.host_callbacks  # never lowered again behind the executable's back
        and _compat.lowering_warnings_name_sources()
    )


def _computation_of(loaded: _load.Loaded, memo_key) -> tuple | None:
    memo = loaded.computations.get(memo_key) if loaded.computations is not None else None
    return None if memo is None else (loaded, memo)


def _call_with_digest(call, jaxpr, digest):
    token = _PRE_DIGEST.set((jaxpr, digest))
    try:
        return call()
    finally:
        _PRE_DIGEST.reset(token)


def _lower_ctx(closed_jaxpr, fun_name, kwargs, probe: bool) -> LowerCtx:
    return LowerCtx(
        closed_jaxpr,
        kwargs.get("keep_unused"),
        fun_name,
        kwargs.get("compiler_options_kvs", ()),
        kwargs.get("lowering_platforms"),
        kwargs.get("pgle_profiler"),
        probe,
    )


def lsc_wrapper(closed_jaxpr, api_name, fun_name, *args, **kwargs):
    ctx = _lower_ctx(closed_jaxpr, fun_name, kwargs, _PROBE.get())
    pre = _PRE_DIGEST.get()
    if pre is not None and pre[0] is closed_jaxpr:
        ctx.jaxpr_digest = pre[1]
    token = _LSC_CTX.set(ctx)
    try:
        return _state.ORIG["lsc"](closed_jaxpr, api_name, fun_name, *args, **kwargs)
    finally:
        _LSC_CTX.reset(token)


def device_assignment_wrapper(*args, **kwargs):
    out = _state.ORIG["devices"](*args, **kwargs)
    ctx = _LSC_CTX.get()
    if ctx is not None:
        backend, device_assignment, _ = out
        ctx.backend = backend
        ctx.device_list = (
            None if device_assignment is None else _compat.create_device_list(device_assignment)
        )
    return out


def _adopted_ctx(lowered_jaxpr) -> LowerCtx | None:
    """The context of a lowering already running when pcache was installed: JAX
    starts its backends, and with them pcache's plugin under ``JAX_PCACHE_DIR``
    alone, inside the device assignment of a process's first lowering. Built from
    that call's own arguments and device assignment, as `lsc_wrapper` and
    `device_assignment_wrapper` would have, so the first program gets the key every
    later process computes for it."""
    found = _compat.inflight_lowering(_state.ORIG["lsc"], lowered_jaxpr)
    if found is None:
        return None
    closed_jaxpr, _api_name, fun_name = found.args[:3]
    ctx = _lower_ctx(closed_jaxpr, fun_name, found.kwargs, False)
    ctx.backend = found.backend
    devices = found.device_assignment
    ctx.device_list = None if devices is None else _compat.create_device_list(devices)
    return ctx


def lowering_wrapper(*args, **kwargs):
    rt, ctx = _state.rt, _LSC_CTX.get()
    lower = _state.ORIG["lower"]
    if ctx is None and rt is not None:
        try:
            ctx = _adopted_ctx(_compat.LoweringCall.of(args, kwargs).closed_jaxpr)
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
        unordered = _compat.unordered_effects(call.closed_jaxpr.effects)
        poly = _compat.shape_poly_state(call.platforms)
        module = Prefetched(loaded, key, predicted, call, (args, kwargs))
        if _relower_for_warnings(loaded):
            # Lower for real: its warnings are issued as JAX issues them (their text
            # names this function's source), and its module is the one materialized.
            module._module = lower(*args, **kwargs)[0]
        else:
            # Outside the try above: a replayed warning that the user's filters turn
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
    if logger.isEnabledFor(logging.DEBUG) or rt.explain:
        _log_miss(rt, key, ctx.fun_name)
    try:
        out, replay = _replay.recorded_lowering(lower, args, kwargs)
    except _replay.LoweringFailed as exc:  # lowering succeeded; reading its record failed
        rt.error("lowering record", exc.__cause__)
        return exc.out
    module, keepalive, host_callbacks = out[0], out[1], out[2]
    if keepalive and key.persistent:
        # Values the executable must keep alive, from a lowering rule: nothing a
        # stored entry could hold. Never store such a program.
        rt.bypass("keepalive", f"{ctx.fun_name}: the lowering registered keepalive values")
        return out
    if host_callbacks and key.persistent:
        # The canonical form marks every host-callback primitive it knows `relower`.
        # Reaching here means a primitive registered callbacks some other way: a hit
        # would skip the lowering that registers them. Never store such a program.
        rt.bypass("host-callback", f"{ctx.fun_name}: unexpected host callbacks in lowering")
        return out
    with _PENDING_LOCK:
        _PENDING[module] = Pending(
            key, predicted, ctx.fun_name, tuple(keepalive), tuple(host_callbacks), replay
        )
    return out


def _serializable(key: CacheKey, call: _compat.LoweringCall, predicted: Predicted) -> CacheKey:
    """``key``, valid in this process only when XLA cannot serialize the program's
    executable without crashing (`_compat.unserializable_program`: ordered effects
    on several devices): compiled into the memory tier, never stored."""
    if not key.persistent:
        return key
    why = _compat.unserializable_program(
        predicted.ordered, call.num_devices, call.in_avals, call.closed_jaxpr.out_avals
    )
    return key if why is None else dataclasses.replace(key, persistent=False, local_why=why)


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
    with _PENDING_LOCK:
        _PENDING[module] = Pending(
            key, predicted, fun_name, tuple(keepalive), tuple(host_callbacks), replay
        )
    return out


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
        with _PENDING_LOCK:
            keyed = _PENDING.pop(computation, None) is not None or keyed
        rt = _state.rt
        if keyed and rt is not None:
            rt.bypass("compile-inputs", f"{call.name}: 0.9 non-SPMD or auto-SPMD compile")
        return call_orig(computation)
    return _compile(computation, call, call_orig)


def _compile(computation, call: _compat.CompileCall, call_orig):
    t0 = time.time()

    def same(predicted: Predicted, callbacks) -> bool:
        return (
            _same_objects(call.host_callbacks, callbacks)
            and call.pgle_profiler is None
            and predicted.matches(call)
        )

    def rekeyed(key: CacheKey) -> CacheKey:
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

    if isinstance(computation, Prefetched):
        if same(computation.predicted, computation.host_callbacks):
            # The record JAX's `_cached_compilation` logs around its compile (and, on
            # a JAX persistent-cache hit, around the cache read): logged, not timed as
            # a backend compile (no monitoring event: no compile happened).
            _log_finished_compile(call.name, t0)
            return computation.executable
        # AOT `.compile(compiler_options=...)` or another device assignment:
        # not what was keyed. Lower for real and take the miss path below.
        pending = Pending(
            rekeyed(computation.key),
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
        with _PENDING_LOCK:
            pending = _PENDING.pop(computation, None)
        if pending is not None and not same(pending.predicted, pending.host_callbacks):
            pending = dataclasses.replace(
                pending, key=rekeyed(pending.key), predicted=pending.predicted.with_call(call)
            )
    rt = _state.rt
    if pending is None or rt is None or call.pgle_profiler is not None:
        return call_orig(computation)
    if not _same_objects(call.host_callbacks, pending.host_callbacks):
        return call_orig(computation)
    key, predicted, backend = pending.key, pending.predicted, call.backend

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
        compile_fn,
        lambda raw, replay: _load.load_entry(raw, replay, backend, predicted),
        meta,
        lambda signature: signature == _load.load_signature(predicted),
        ws,
        cls,
    )
    if bool(loaded.replay.host_callbacks) != bool(pending.host_callbacks):
        rt.bypass("host-callback-module", f"{call.name}: stored with other host callbacks")
        return call_orig(computation)
    if pending.host_callbacks and not _same_objects(loaded.host_callbacks, pending.host_callbacks):
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


def stablehlo_wrapper(self):
    hlo = self._hlo
    if isinstance(hlo, Prefetched):
        return hlo.materialize()
    return hlo


# ------------------------------------------------------------------ helpers


def _log_finished_compile(name, t0: float) -> None:
    priority = logging.WARNING if _compat.log_compiles() else logging.DEBUG
    if _compat.dispatch_logger.isEnabledFor(priority):
        _compat.dispatch_logger.log(
            priority, f"Finished XLA compilation of {name} in {time.time() - t0:.9f} sec"
        )


def _same_objects(a, b) -> bool:
    """Same callbacks, by identity (they are process-local objects)."""
    a, b = tuple(a or ()), tuple(b or ())
    return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))


def _fresh(fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` with every memo off: computed from scratch."""
    with _canon.fresh():
        return fn(*args, **kwargs)


def _check_same(what: str, memoized, fresh) -> None:
    if memoized != fresh:
        raise CheckError(f"pcache check: memoized {what} {memoized!r} != fresh {fresh!r}")


def _check_key(ctx: LowerCtx, call: _compat.LoweringCall, key: CacheKey) -> None:
    """``JAX_PCACHE_CHECK``: the key, computed again with no memo, is the same."""
    again = LowerCtx(
        ctx.jaxpr, ctx.keep_unused, ctx.fun_name, ctx.compiler_options_kvs,
        ctx.lowering_platforms, ctx.pgle_profiler, False,
    )  # fmt: skip
    again.device_list, again.backend = ctx.device_list, ctx.backend
    fresh, predicted = _fresh(again.key, call)
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
    token = _PROBE.set(True)
    try:
        _compat.lower_for_fingerprint(fun, args, kwargs, _compat.current("lsc"))
    except _ProbeResult as res:
        return res.key
    finally:
        _PROBE.reset(token)
    raise Uncacheable("not-lowered", "JAX did not reach the lowering seam for this call")
