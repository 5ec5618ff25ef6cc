"""Every use of JAX private internals in pcache lives in this module.

The next JAX release should be a one-file change: this module checks the JAX version
it was written against (`SUPPORTED`) and, on a JAX it does not know, installs only
the HLO-level seam (JAX's own persistent-cache interface, public enough to be
stable) and warns once.

The jit seam
------------
For `jax.jit`, JAX lowers a ClosedJaxpr in `pxla.lower_sharding_computation`, which
calls `pxla._cached_lowering_to_hlo` (jaxpr -> StableHLO) and later, from
`MeshComputation.compile`, `pxla._cached_compilation` (StableHLO -> executable).
Both are keyed on object identity, so a re-created `jit(grad(f))` misses both.

pcache wraps the two:

* `_cached_lowering_to_hlo`: compute the key (fingerprint of the jaxpr plus every
  other lowering input, the compile inputs that are already known, and the
  environment). On a hit in the memory tier or the store, skip lowering: return a
  `_Prefetched` placeholder module that carries the ready executable, and the few
  other lowering outputs, which for a cacheable program are determined by the
  jaxpr (effects, `tuple_args`) or empty (host callbacks, keepalive).
* `_cached_compilation`: a `_Prefetched` module whose compile inputs match what was
  keyed returns its executable without compiling. A real module with a pending key
  (a miss) is compiled through the runtime's single-flight and stored.

Anything unexpected (a placeholder reaching a consumer that wants the real module,
compile inputs that differ from those keyed) makes the placeholder lower for real:
the cache can only cost time, never change the program.
"""

from __future__ import annotations

import collections
import contextlib
import contextvars
import hashlib
import logging
import os
import sys
import threading
import time
import warnings
import weakref
from typing import Any, NamedTuple

import jax
import jaxlib
import numpy as np

from pcache import _cache
from pcache._errors import CheckError, Uncacheable
from pcache._key import CacheKey

logger = logging.getLogger("pcache")

# The JAX lines this module's seam was written against (the private names below
# exist with these signatures there). Outside it, only the HLO-level seam is used.
# 0.9.x is served from 0.9.2 (the first 0.9 release the seam was verified on, by
# scripts/compat.sh); the differences are confined to the `_v09()` adapters below.
SUPPORTED = ((0, 9, 2), (0, 11, 0))


def jax_version() -> tuple[int, ...]:
    return tuple(int(p) for p in jax.__version__.split(".")[:3] if p.isdigit())


def jit_seam_supported() -> bool:
    lo, hi = SUPPORTED
    return lo <= jax_version() < hi


def _v09() -> bool:
    """The 0.9.x line: `_cached_lowering_to_hlo` also returns `nreps` (jit-of-pmap),
    `_cached_compilation` takes mesh/spmd_lowering/auto_spmd_lowering/pmap_nreps."""
    return jax_version() < (0, 10, 0)


if jit_seam_supported():
    from jax._src import compilation_cache as _cc
    from jax._src import compiler as _compiler
    from jax._src import config as _config
    from jax._src import dispatch as _dispatch
    from jax._src import effects as _effects
    from jax._src import pjit as _pjit
    from jax._src.interpreters import mlir as _mlir
    from jax._src.interpreters import pxla as _pxla
else:  # pragma: no cover - exercised by scripts/compat.sh on other JAX lines
    _pxla = None
    try:
        from jax._src import compilation_cache as _cc
        from jax._src import compiler as _compiler
        from jax._src import config as _config
    except ImportError:
        _cc = _compiler = None


# --------------------------------------------------------------------------- keys


def _canon_module():
    # Imported lazily: _canon imports this module for the private names it needs.
    from pcache import _canon

    return _canon


def _h(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _vd(obj: Any) -> str:
    return _canon_module().value_digest(obj).hex()


# (id(backend), trace context, other config values) -> (backend, parts, hash).
# Sound: the key holds every input environment_parts reads that can change in a
# running process (trace_context(): x64, matmul precision...; the config values
# outside it: optimization level...); XLA's flags are those of backend start-up,
# fixed for the process; the backend is kept in the value and compared by
# identity, so a recycled id() (after jax.clear_backends) never matches.
_ENV_CACHE: dict[tuple, tuple[Any, list[tuple[str, str]], str]] = {}


def _environment(backend) -> tuple[list[tuple[str, str]], str]:
    """The environment key parts (versions, XLA flags, JAX configuration) and one
    hash of them all: what a preloaded entry must have been written under."""
    canon = _canon_module()
    memo_key = (id(backend), _config.trace_context(), canon.extra_config_values())
    try:
        got = _ENV_CACHE.get(memo_key) if canon.memos_on() else None
    except TypeError:  # an unhashable config value: recompute each time
        got, memo_key = None, None
    if got is None or got[0] is not backend:
        parts = [(name, _h(data)) for name, data in canon.environment_parts(backend)]
        got = (backend, parts, _h("".join(f"{name}={h};" for name, h in parts).encode()))
        if memo_key is not None and canon.memos_on():
            _ENV_CACHE[memo_key] = got
    return got[1], got[2]


def _device_part(device_list) -> str:
    # The executable is built for exactly these devices: ids and kinds go in the key.
    return _vd(
        tuple(
            (d.id, d.platform, d.device_kind, getattr(d, "process_index", 0)) for d in device_list
        )
    )


def _compile_parts(tuple_args, allow_in, allow_out, device_list, compiler_options_kvs):
    return [
        ("tuple_args", _vd(bool(tuple_args))),
        ("allow_prop_in", _vd(tuple(bool(b) for b in allow_in))),
        ("allow_prop_out", _vd(tuple(bool(b) for b in allow_out))),
        ("devices", _device_part(device_list)),
        # XLA applies repeated options last-one-wins (`dict(kvs)`); deduplicate the
        # same way before sorting, or (o=F, o=T) and (o=T, o=F) would share a key.
        ("compiler_options", _vd(tuple(sorted(dict(compiler_options_kvs).items())))),
    ]


def _jaxpr_fingerprint(ctx: _LowerCtx):
    """The digest of the jaxpr `lower_sharding_computation` was given (before JAX's
    DCE and ref discharge, which are deterministic functions of it and of the keyed
    `keep_unused`). Computed once per lowering: `_pjit_lower_wrapper` hands over the
    digest it already took for its own memo. Literals are keyed by content, also
    where lowering hoists them into arguments (over-keying is safe).
    """
    if ctx.jaxpr_digest is None:
        ctx.jaxpr_digest = _canon_module().jaxpr_fingerprint(ctx.jaxpr)
    return ctx.jaxpr_digest


class _LowerCtx:
    """What `lower_sharding_computation` knows that `_cached_lowering_to_hlo` is not told."""

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


_LSC_CTX: contextvars.ContextVar[_LowerCtx | None] = contextvars.ContextVar(
    "pcache_lsc", default=None
)
_PROBE: contextvars.ContextVar[bool] = contextvars.ContextVar("pcache_probe", default=False)


class _ProbeResult(Exception):
    """Raised from inside lowering by `fingerprint()` to return the key unlowered."""

    def __init__(self, key: CacheKey) -> None:
        self.key = key


def _lowering_key(ctx: _LowerCtx, args: tuple, kwargs: dict) -> tuple[CacheKey, dict]:
    """The cache key of one `_cached_lowering_to_hlo` call (+ predicted compile inputs)."""
    (
        closed_jaxpr,
        module_name,
        backend,
        num_const_args,
        in_avals,
        sem_in,
        sem_out,
        in_layouts,
        out_layouts,
        num_devices,
        device_assignment,
        donated_invars,
        all_default_mem_kind,
        inout_aliases,
        propagated_out_mem_kinds,
        platforms,
    ) = args
    lowering_parameters = kwargs["lowering_parameters"]
    abstract_mesh = kwargs.get("abstract_mesh")
    if ctx.pgle_profiler is not None:
        raise Uncacheable("pgle", "profile-guided recompilation changes the program per run")
    if lowering_parameters.override_lowering_rules:
        raise Uncacheable("override-lowering-rules", "custom lowering rules are process-local")
    if ctx.device_list is None:
        raise Uncacheable("no-device-assignment", "abstract-mesh lowering (export) is not cached")
    if any(
        getattr(a, "shape", None) is not None and not all(isinstance(d, int) for d in a.shape)
        for a in in_avals
    ):
        raise Uncacheable("dynamic-shapes", "symbolic dimensions")
    _check_line_specific(closed_jaxpr, sem_in, sem_out)
    d = _jaxpr_fingerprint(ctx)
    jaxpr_hex, persistent = d.digest.hex(), d.persistent
    ordered = list(_effects.ordered_effects.filter_in(closed_jaxpr.effects))
    tuple_args = _dispatch.should_tuple_args(len(in_avals), backend.platform)
    allow_in, allow_out = _pxla.get_prop_to_input_output(
        sem_in.shardings, sem_out.shardings, len(ordered)
    )
    lp = (
        lowering_parameters.global_constant_computation,
        lowering_parameters.for_export,
        lowering_parameters.export_ignore_forward_compatibility,
        lowering_parameters.hoist_constants_as_args,
    )
    # Everything but the jaxpr, memoized on the same values (compared with the same
    # __eq__) that key JAX's own lowering and compilation caches: equal inputs here
    # make JAX itself reuse one module and one executable. Saves ~0.25 ms a hit.
    inputs = _ContextInputs(
        id(backend),
        num_const_args,
        tuple(in_avals),
        sem_in,
        sem_out,
        tuple(in_layouts),
        tuple(out_layouts),
        num_devices,
        tuple(donated_invars),
        inout_aliases,
        all_default_mem_kind,
        tuple(propagated_out_mem_kinds),
        tuple(platforms),
        lp,
        abstract_mesh,
        tuple_args,
        tuple(allow_in),
        tuple(allow_out),
        ctx.device_list,
        ctx.compiler_options_kvs,
    )
    try:
        context = _CONTEXT_MEMO.get(inputs)
    except TypeError:  # an unhashable input (e.g. a compiler option value)
        context = None
        cacheable = False
    else:
        cacheable = True
    if context is None:
        context = _context_parts(inputs)
        if cacheable:
            _CONTEXT_MEMO.put(inputs, context)
    env, env_digest = _environment(backend)
    parts = [
        ("jaxpr", jaxpr_hex),
        ("keep_unused", _vd(bool(ctx.keep_unused))),
        *context,
        *env,
    ]
    predicted = dict(
        tuple_args=tuple_args,
        allow_in=tuple(allow_in),
        allow_out=tuple(allow_out),
        device_list=ctx.device_list,
        compiler_options_kvs=ctx.compiler_options_kvs,
        ordered=ordered,
        env=env_digest,
    )
    return CacheKey(parts=tuple(parts), persistent=persistent), predicted


class _ContextInputs(NamedTuple):
    """The lowering and compile inputs besides the jaxpr (hashable: the memo key)."""

    backend_id: int
    num_const_args: int
    in_avals: tuple
    sem_in: Any
    sem_out: Any
    in_layouts: tuple
    out_layouts: tuple
    num_devices: int
    donated_invars: tuple
    inout_aliases: Any
    all_default_mem_kind: bool
    out_mem_kinds: tuple
    platforms: tuple
    lowering_parameters: tuple
    abstract_mesh: Any
    tuple_args: bool
    allow_in: tuple
    allow_out: tuple
    device_list: Any
    compiler_options_kvs: tuple


def _context_parts(i: _ContextInputs) -> tuple[tuple[str, str], ...]:
    return (
        ("in_avals", _vd(i.in_avals)),
        ("num_const_args", _vd(i.num_const_args)),
        ("in_shardings", _vd(tuple(i.sem_in.shardings))),
        ("out_shardings", _vd(tuple(i.sem_out.shardings))),
        ("in_layouts", _vd(i.in_layouts)),
        ("out_layouts", _vd(i.out_layouts)),
        ("num_devices", _vd(i.num_devices)),
        ("donated_invars", _vd(tuple(bool(d) for d in i.donated_invars))),
        ("inout_aliases", _vd(i.inout_aliases)),
        ("all_default_mem_kind", _vd(bool(i.all_default_mem_kind))),
        ("out_mem_kinds", _vd(i.out_mem_kinds)),
        ("platforms", _vd(i.platforms)),
        ("lowering_parameters", _vd(i.lowering_parameters)),
        ("abstract_mesh", _vd(i.abstract_mesh)),
        *_compile_parts(
            i.tuple_args, i.allow_in, i.allow_out, i.device_list, i.compiler_options_kvs
        ),
    )


class _BoundedMemo:
    """A small thread-safe LRU dict (the key memo must not grow without bound).

    Keyed by value (``__eq__``/``__hash__``), never by identity."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._d: collections.OrderedDict = collections.OrderedDict()
        self._lock = threading.Lock()

    def get(self, key):
        if not _canon_module().memos_on():
            return None
        with self._lock:
            value = self._d.get(key)
            if value is not None:
                self._d.move_to_end(key)
            return value

    def put(self, key, value) -> None:
        if not _canon_module().memos_on():
            return
        with self._lock:
            self._d[key] = value
            while len(self._d) > self._size:
                self._d.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._d.clear()


# _ContextInputs -> the key parts besides the jaxpr and the environment. Sound: the
# inputs are the values (compared by __eq__, as JAX's own lowering cache compares
# them: avals, shardings, layouts, device lists, options) the parts are computed
# from; id(backend) only over-keys (no part is computed from the backend).
_CONTEXT_MEMO = _BoundedMemo(1024)
# `_pjit_lower` memo key -> digest of the full key whose memory-tier entry holds the
# MeshComputation (see `_pjit_lower_wrapper`). Sound: the memo key is the jaxpr's
# canonical digest (content, revalidated: see _canon._JAXPR_MEMO) and every other
# `_pjit_lower` input by value, the trace context and the other config values.
_COMPUTATIONS = _BoundedMemo(4096)


def _check_line_specific(closed_jaxpr, sem_in, sem_out) -> None:
    """Programs whose lowering/compile inputs the key cannot predict on this JAX line."""
    if not _v09():
        return
    # 0.9: jit-of-pmap lowers with nreps > 1 replicas (a replica-parallel program,
    # compiled with pmap_nreps); the cached path assumes nreps == 1.
    jaxpr = closed_jaxpr.jaxpr
    if _pxla._jaxpr_replicas(jaxpr) != 1 or _dispatch.jaxpr_has_primitive(jaxpr, "xla_pmap"):
        raise Uncacheable("jit-of-pmap", "0.9: jit of pmap lowers to a replicated program")
    # 0.9: AUTO shardings compile with auto-SPMD partitioning (mesh-dependent options).
    if any(isinstance(s, _pxla.AUTO) for s in (*sem_in.shardings, *sem_out.shardings)):
        raise Uncacheable("auto-sharding", "0.9: AUTO shardings use auto-SPMD partitioning")


def _lowering_result(module, keepalive, host_callbacks, unordered, ordered, tuple_args, poly):
    """`_cached_lowering_to_hlo`'s return value on this JAX line."""
    if _v09():  # 0.9 also returns nreps (always 1 here: see _check_line_specific)
        return (module, keepalive, host_callbacks, unordered, ordered, 1, tuple_args, poly)
    return (module, keepalive, host_callbacks, unordered, ordered, tuple_args, poly)


def _with_compile_parts(key: CacheKey, parts: list[tuple[str, str]]) -> CacheKey:
    names = {n for n, _ in parts}
    new = [(n, dict(parts)[n]) if n in names else (n, h) for n, h in key.parts]
    return CacheKey(parts=tuple(new), persistent=key.persistent)


# ------------------------------------------------------- lowering side effects
#
# Lowering does more than produce a module, and a hit that skips lowering must still
# do the rest, from what the entry records (never by a special case for one kernel):
#
# * custom-call kernels that a lowering rule initializes on first use (jaxlib's
#   LAPACK rules call `prepare_lapack_call`, which loads the LAPACK function
#   pointers; GPU hybrid eig/qr kernels likewise): the entry records the custom-call
#   targets its module calls, and loading it runs the initializer of each target's
#   kernel library (`_KERNEL_INITIALIZERS`) before the executable is deserialized;
# * warnings lowering emits (unusable donated buffers, large captured constants,
#   a user lowering rule's own): recorded on the miss with their category, text and
#   location, re-issued on every hit through `warnings.warn_explicit` with the
#   registry of the module that issued them, so the user's filters (`-W error`,
#   `ignore`, "once per location") decide exactly as they would have;
# * the `jax_log_compiles` "Compiling ..." record, logged again on each hit.
#
# Monitoring events are not replayed: JAX's lowering and backend-compile events
# mean work that a hit does not do (pcache records its own `/pcache/*` events).


def _kernel_initializers() -> tuple[tuple[str, Any], ...]:
    """(custom-call target prefix, initializer) for the kernel libraries whose
    lowering rules initialize them lazily, on this JAX line."""
    from jax._src.lib import gpu_solver as _gpu_solver
    from jax._src.lib import lapack as _lapack

    # What `lapack.prepare_lapack_call` runs (jaxlib 0.9 and 0.10 alike).
    table: list[tuple[str, Any]] = [("lapack_", _lapack._lapack.initialize)]
    hybrid = getattr(_gpu_solver, "initialize_hybrid_kernels", None)
    if hybrid is not None:
        table += [("cu_hybrid_", hybrid), ("hip_hybrid_", hybrid)]
    return tuple(table)


_KERNEL_INITIALIZERS: tuple | None = None
_INITIALIZED: set = set()  # initializers already run in this process (never undone)


def _initialize_targets(targets) -> None:
    global _KERNEL_INITIALIZERS
    if _KERNEL_INITIALIZERS is None:
        _KERNEL_INITIALIZERS = _kernel_initializers()
    for target in targets:
        for prefix, init in _KERNEL_INITIALIZERS:
            if target.startswith(prefix) and init not in _INITIALIZED:
                init()
                _INITIALIZED.add(init)


def _custom_call_targets(module) -> tuple[str, ...]:
    """The custom-call targets a lowered module calls (sorted, unique)."""
    from jax._src.lib.mlir import ir

    found: set[str] = set()

    def visit(op):
        if op.name == "stablehlo.custom_call":
            found.add(ir.StringAttr(op.attributes["call_target_name"]).value)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return tuple(sorted(found))


class WarningRecord(NamedTuple):
    """A warning lowering issued: enough to issue it again as `warnings.warn` did."""

    category: str  # "module:QualName"
    message: str
    filename: str
    lineno: int
    module: str


class Replay(NamedTuple):
    """What a lowering did besides producing its module (see the section comment)."""

    custom_calls: tuple[str, ...] = ()
    warnings: tuple[WarningRecord, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "custom_calls": list(self.custom_calls),
            "warnings": [list(w) for w in self.warnings],
        }

    @classmethod
    def from_json(cls, obj) -> Replay:
        """Validated: a malformed record raises (the entry is then not used)."""
        if obj is None:
            return NO_REPLAY
        calls, warns = obj["custom_calls"], obj["warnings"]
        if not (isinstance(calls, list) and all(isinstance(c, str) for c in calls)):
            raise ValueError("replay: custom_calls is not a list of names")
        records = []
        for w in warns:
            rec = WarningRecord(*w)
            if (
                not all(
                    isinstance(v, str)
                    for v in (rec.category, rec.message, rec.filename, rec.module)
                )
                or type(rec.lineno) is not int
            ):
                raise ValueError("replay: malformed warning record")
            records.append(rec)
        return cls(tuple(calls), tuple(records))

    def initialize_kernels(self) -> None:
        if self.custom_calls:
            _initialize_targets(self.custom_calls)

    def on_hit(self, log_args) -> None:
        """What a lowering would have done, done on a hit instead of lowering."""
        if log_args is not None and _pxla_logger.isEnabledFor(
            logging.WARNING if _config.log_compiles.value else logging.DEBUG
        ):
            _log_compiling(*log_args)
        for w in self.warnings:
            _reissue(w)


NO_REPLAY = Replay()
_pxla_logger = logging.getLogger("jax._src.interpreters.pxla")


def _log_compiling(module_name, in_avals, in_shardings) -> None:
    # The record `_cached_lowering_to_hlo` writes (same logger, level and text).
    priority = logging.WARNING if _config.log_compiles.value else logging.DEBUG
    _pxla_logger.log(
        priority,
        "Compiling %s with global shapes and types %s. Argument mapping: %s.",
        module_name,
        in_avals,
        in_shardings,
    )


def _warning_category(name: str) -> type[Warning]:
    """The class a record names, if it is loaded already (nothing is imported for a
    record: it came from the store); UserWarning otherwise."""
    import sys

    mod, _, qual = name.partition(":")
    obj: Any = sys.modules.get(mod)
    for part in qual.split("."):
        obj = getattr(obj, part, None)
    return obj if isinstance(obj, type) and issubclass(obj, Warning) else UserWarning


def _reissue(w: WarningRecord) -> None:
    import sys

    mod = sys.modules.get(w.module)
    registry = mod.__dict__.setdefault("__warningregistry__", {}) if mod is not None else None
    warnings.warn_explicit(
        w.message, _warning_category(w.category), w.filename, w.lineno, w.module, registry
    )


# Warnings issued while this context records (a list), for `_recording_warn`.
_WARN_RECORD: contextvars.ContextVar[list | None] = contextvars.ContextVar(
    "pcache_warn_record", default=None
)
_ORIG_WARN = warnings.warn


def _recording_warn(message, category=None, stacklevel=1, source=None, **kwargs):
    """`warnings.warn`, which also notes the warning while a lowering is recorded.

    Installed once for the process (thread-safe, unlike `catch_warnings`); outside a
    recorded lowering it only forwards. The filters still decide what happens.
    """
    record = _WARN_RECORD.get()
    if record is not None:
        try:
            import sys

            if isinstance(message, Warning):
                category, text = type(message), str(message)
            else:
                category, text = category or UserWarning, str(message)
            frame = sys._getframe(max(1, stacklevel))
            record.append(
                WarningRecord(
                    f"{category.__module__}:{category.__qualname__}",
                    text,
                    frame.f_code.co_filename,
                    frame.f_lineno,
                    frame.f_globals.get("__name__", "<string>"),
                )
            )
        except Exception:  # a frame deeper than the stack: not recorded, still issued
            pass
    return _ORIG_WARN(message, category, stacklevel + 1, source, **kwargs)


def _install_warning_hook() -> None:
    if warnings.warn is not _recording_warn:
        warnings.warn = _recording_warn


def _recorded_lowering(lower, args, kwargs):
    """Lower, and return ``(lowering result, its Replay)``."""
    record: list = []
    token = _WARN_RECORD.set(record)
    try:
        out = lower(*args, **kwargs)
    finally:
        _WARN_RECORD.reset(token)
    try:
        return out, Replay(_custom_call_targets(out[0]), tuple(record))
    except Exception as exc:
        raise _LoweringFailed(out) from exc


class _LoweringFailed(Exception):
    """The lowering's record could not be read; ``out`` is the lowering's result."""

    def __init__(self, out) -> None:
        self.out = out


# ------------------------------------------------------------------- the seam


class _Loaded(NamedTuple):
    """A memory-tier value: the executable and what must outlive it.

    ``keepalive`` and ``host_callbacks`` are empty for anything from the store; a
    program with host callbacks (memory tier only: its key identifies the Python
    callback objects) keeps the ones its lowering registered, so a hit hands JAX
    the same callbacks the executable was compiled against.
    """

    executable: Any
    keepalive: tuple = ()
    host_callbacks: tuple = ()
    module: Any = None  # callback programs: the lowered module those callbacks belong to
    # MeshComputations built around this executable, by `_pjit_lower` memo key; kept
    # here so the memory tier's eviction drops them with the executable.
    computations: dict | None = None
    replay: Replay = None  # what the lowering did besides the module (see `Replay`)


def _loaded(executable, keepalive=(), host_callbacks=(), module=None, replay=None) -> _Loaded:
    return _Loaded(
        executable, tuple(keepalive), tuple(host_callbacks), module, {}, replay or NO_REPLAY
    )


def _load_entry(raw: bytes, replay_json, backend, predicted) -> _Loaded:
    """An entry from the store, ready to run: its replay record is checked and its
    custom-call kernels initialized before the executable is deserialized."""
    replay = Replay.from_json(replay_json)
    replay.initialize_kernels()
    return _loaded(_deserialize(raw, backend, predicted), replay=replay)


class _Prefetched:
    """Stands in for the StableHLO module when the executable came from the cache.

    Holds what is needed to lower for real if anything asks for the module.
    """

    def __init__(self, loaded: _Loaded, key, predicted, lower_args, lower_kwargs):
        self.loaded = loaded
        self.executable = loaded.executable
        self.host_callbacks = loaded.host_callbacks
        self.keepalive = loaded.keepalive
        self.key = key
        self.predicted = predicted
        self._lower = (lower_args, lower_kwargs)
        # module name, in_avals, in_shardings: what the `jax_log_compiles` record names
        self.log_args = (lower_args[1], lower_args[4], lower_args[5].shardings)
        # A callback program must never be re-lowered behind the executable's back:
        # re-lowering registers new callbacks. Reuse the module it was compiled from.
        self._module = loaded.module

    def materialize(self):
        if self._module is None:
            args, kwargs = self._lower
            self._module = _ORIG["lower"](*args, **kwargs)[0]
        return self._module


class _Pending(NamedTuple):
    """What a miss's lowering hands the compile of its module."""

    key: CacheKey
    predicted: dict  # the compile inputs the key assumed
    fun_name: str
    keepalive: tuple
    host_callbacks: tuple
    replay: Replay


# Real modules lowered on a miss -> their _Pending.
# Keyed by the module object's identity (weakly: the entry dies with the module);
# a module is immutable once lowered, and an entry is popped by its one compile.
_PENDING: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_PENDING_LOCK = threading.Lock()
_ORIG: dict[str, Any] = {}
_RT = None  # the active pcache._cache.Runtime


def _runtime():
    return _RT


def _pjit_lower_wrapper(
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
        return _ORIG["pjit_lower"](
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

    rt = _RT
    if rt is None or pgle_profiler is not None or _PROBE.get():
        return call()
    try:
        canon = _canon_module()
        d = canon.jaxpr_fingerprint(jaxpr)
        if rt.check_mode:
            _check_same("jaxpr digest", d, _fresh(canon.jaxpr_fingerprint, jaxpr))
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
            compiler_options_kvs,
            lowering_platforms,
            lowering_parameters,
            _config.trace_context(),
            canon.extra_config_values(),
        )
        digest = _COMPUTATIONS.get(memo_key)
    except Exception:  # uncacheable or unhashable: the lowering seam decides and counts
        return call()
    if digest is not None and rt.check_mode:
        # Take the whole lowering path, and check that it arrives at the same key.
        comp = _call_with_digest(call, jaxpr, d)
        hlo = getattr(comp, "_hlo", None)
        if isinstance(hlo, _Prefetched):
            _check_same("computation memo", digest, hlo.key.digest)
        return comp
    if digest is not None:
        loaded = rt.memory.get(digest)
        memo = loaded.computations.get(memo_key) if loaded is not None else None
        if memo is not None:
            comp, log_args = memo
            rt.stats.add("memory_hits")
            jax.monitoring.record_event("/pcache/memory_hits")
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
        isinstance(hlo, _Prefetched)
        and hlo.key.persistent
        and hlo.loaded.computations is not None
        and not comp.const_args
        and not jaxpr.consts
    ):
        if len(hlo.loaded.computations) < 4:
            hlo.loaded.computations[memo_key] = (comp, hlo.log_args)
            _COMPUTATIONS.put(memo_key, hlo.key.digest)
    return comp


# (jaxpr, its JaxprDigest) from `_pjit_lower_wrapper` to the lowering it calls.
_PRE_DIGEST: contextvars.ContextVar = contextvars.ContextVar("pcache_pre_digest", default=None)


def _call_with_digest(call, jaxpr, digest):
    token = _PRE_DIGEST.set((jaxpr, digest))
    try:
        return call()
    finally:
        _PRE_DIGEST.reset(token)


def _lsc_wrapper(closed_jaxpr, api_name, fun_name, *args, **kwargs):
    ctx = _LowerCtx(
        closed_jaxpr,
        kwargs.get("keep_unused"),
        fun_name,
        kwargs.get("compiler_options_kvs", ()),
        kwargs.get("lowering_platforms"),
        kwargs.get("pgle_profiler"),
        _PROBE.get(),
    )
    pre = _PRE_DIGEST.get()
    if pre is not None and pre[0] is closed_jaxpr:
        ctx.jaxpr_digest = pre[1]
    token = _LSC_CTX.set(ctx)
    try:
        return _ORIG["lsc"](closed_jaxpr, api_name, fun_name, *args, **kwargs)
    finally:
        _LSC_CTX.reset(token)


def _device_assignment_wrapper(*args, **kwargs):
    out = _ORIG["devices"](*args, **kwargs)
    ctx = _LSC_CTX.get()
    if ctx is not None:
        backend, device_assignment, _ = out
        ctx.backend = backend
        ctx.device_list = (
            None if device_assignment is None else _pxla._create_device_list(device_assignment)
        )
    return out


def _lowering_wrapper(*args, **kwargs):
    rt, ctx = _RT, _LSC_CTX.get()
    if ctx is None or (rt is None and not ctx.probe):
        return _ORIG["lower"](*args, **kwargs)
    t0 = time.perf_counter()
    try:
        key, predicted = _lowering_key(ctx, args, kwargs)
    except Uncacheable as exc:
        if ctx.probe:
            raise
        rt.bypass(exc.reason, str(exc))
        return _ORIG["lower"](*args, **kwargs)
    except Exception as exc:
        if ctx.probe:  # `pcache.fingerprint`: only ever Uncacheable, with a reason
            raise Uncacheable(f"fingerprint-error:{type(exc).__name__}", str(exc)) from exc
        rt.error("fingerprint", exc)
        rt.bypass("fingerprint-error", repr(exc))
        return _ORIG["lower"](*args, **kwargs)
    if ctx.probe:
        raise _ProbeResult(key)
    if rt.check_mode:
        _check_key(ctx, args, kwargs, key)
    jax.monitoring.record_event_duration_secs(
        "/pcache/fingerprint_time_sec", time.perf_counter() - t0
    )
    backend = args[2]
    try:
        ws = _working_set_name(backend) if key.persistent else None
        if ws is not None and rt.preload_pending(ws):
            try:
                rt.start_preload(ws, key.digest, *_preload_fns(backend, predicted["env"]))
            except Exception as exc:  # a speedup only: never let it cost the lookup
                rt.background_error("preload", exc)
        loaded = rt.lookup(
            key,
            lambda raw, replay: _load_entry(raw, replay, backend, predicted),
            lambda signature: signature == _load_signature(predicted),
            working_set=ws,
        )
    except CheckError:
        raise
    except Exception as exc:  # the cache must never break the program: compile instead
        rt.error("lookup", exc)
        loaded = None
    if loaded is not None:
        closed_jaxpr = args[0]
        unordered = list(_effects.ordered_effects.filter_not_in(closed_jaxpr.effects))
        poly = _mlir.ShapePolyLoweringState((), tuple(args[15]))
        module = _Prefetched(loaded, key, predicted, args, kwargs)
        # Outside the try above: a replayed warning that the user's filters turn
        # into an error raises here, as it would have from the lowering.
        loaded.replay.on_hit(module.log_args)
        return _lowering_result(
            module,
            list(loaded.keepalive),
            list(loaded.host_callbacks),
            unordered,
            predicted["ordered"],
            predicted["tuple_args"],
            poly,
        )
    if logger.isEnabledFor(logging.DEBUG) or rt.explain:
        _log_miss(rt, key, ctx.fun_name)
    try:
        out, replay = _recorded_lowering(_ORIG["lower"], args, kwargs)
    except _LoweringFailed as exc:  # lowering succeeded; only reading its record failed
        rt.error("lowering record", exc.__cause__)
        return exc.out
    module, keepalive, host_callbacks = out[0], out[1], out[2]
    if (host_callbacks or keepalive) and key.persistent:
        # Host callbacks come from Python callables in params, which the canonical
        # form keys by identity (making the key memory-only). Reaching here means a
        # primitive registered callbacks some other way: never store such a program.
        rt.bypass("host-callback", f"{ctx.fun_name}: unexpected host callbacks in lowering")
        return out
    with _PENDING_LOCK:
        _PENDING[module] = _Pending(
            key, predicted, ctx.fun_name, tuple(keepalive), tuple(host_callbacks), replay
        )
    return out


def _fresh(fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` with every memo off: computed from scratch."""
    with _canon_module().fresh():
        return fn(*args, **kwargs)


def _check_same(what: str, memoized, fresh) -> None:
    if memoized != fresh:
        raise CheckError(f"pcache check: memoized {what} {memoized!r} != fresh {fresh!r}")


def _check_key(ctx: _LowerCtx, args, kwargs, key: CacheKey) -> None:
    """``JAX_PCACHE_CHECK``: the key, computed again with no memo, is the same."""
    again = _LowerCtx(
        ctx.jaxpr, ctx.keep_unused, ctx.fun_name, ctx.compiler_options_kvs,
        ctx.lowering_platforms, ctx.pgle_profiler, False,
    )  # fmt: skip
    again.device_list, again.backend = ctx.device_list, ctx.backend
    fresh, _ = _fresh(_lowering_key, again, args, kwargs)
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


# id(backend) -> (backend, working-set name); the backend is kept and compared, so
# a recycled id() (after jax.clear_backends) never names another backend's set.
_SET_NAMES: dict[int, tuple[Any, str]] = {}


def _working_set_name(backend) -> str:
    """The working set a lookup on ``backend`` belongs to: this program on this
    backend and device kind (and process, in a multi-process run), with this JAX."""
    got = _SET_NAMES.get(id(backend))
    name = got[1] if got is not None and got[0] is backend else None
    if name is None:
        d0 = backend.local_devices()[0]
        proc = ""
        count = len({getattr(d, "process_index", 0) for d in backend.devices()})
        if count > 1:
            proc = f", process {backend.process_index()}/{count}"
        name = (
            f"{_cache.program_name()} [{backend.platform}/{d0.device_kind}{proc}, "
            f"jax {jax.__version__}, jaxlib {jaxlib.__version__}]"
        )
        _SET_NAMES[id(backend)] = (backend, name)
    return name


LOAD_PARAMS_VERSION = 1


def _load_params(backend, predicted) -> dict | None:
    """What a preload needs to deserialize an entry as ``_deserialize`` would, and to
    tell first that the entry is for this backend and environment (stored in the
    entry's ``extra``, under its own HMAC); None if not representable in JSON."""
    kvs = [[k, v] for k, v in predicted["compiler_options_kvs"]]
    if predicted.get("env") is None or not all(
        isinstance(v, (str, bool, int, float)) for _, v in kvs
    ):
        return None
    devices = list(predicted["device_list"])
    return {
        "v": LOAD_PARAMS_VERSION,
        "platform": backend.platform,
        "platform_version": backend.platform_version,
        "jax": jax.__version__,
        "jaxlib": jaxlib.__version__,
        "env": predicted["env"],
        "tuple_args": bool(predicted["tuple_args"]),
        "allow_in": [bool(b) for b in predicted["allow_in"]],
        "allow_out": [bool(b) for b in predicted["allow_out"]],
        "compiler_options": kvs,
        "device_ids": [d.id for d in devices],
        "device_kinds": [d.device_kind for d in devices],
        "process_indices": [getattr(d, "process_index", 0) for d in devices],
    }


def _load_signature(predicted) -> tuple:
    """How an executable is loaded: compared before a preloaded one is used."""
    return (
        predicted.get("env"),
        bool(predicted["tuple_args"]),
        tuple(bool(b) for b in predicted["allow_in"]),
        tuple(bool(b) for b in predicted["allow_out"]),
        # As XLA applies them (last one wins) and as the key has them.
        tuple(sorted(dict(predicted["compiler_options_kvs"]).items())),
        tuple(predicted["device_list"]),
    )


def _preload_fns(backend, env: str):
    """``(usable, load)`` for the preload thread. ``usable(params)``: whether an entry
    with these load parameters was written for this backend, this process and the
    environment ``env`` the program runs under (taken on the main thread) and can be
    loaded the same way from this thread. ``load(raw, params)``: deserialize it."""
    devices = {d.id: d for d in backend.devices()}
    me = backend.process_index()

    def chosen(params: dict):
        devs = [devices.get(i) for i in params["device_ids"]]
        if (
            any(d is None for d in devs)
            or [d.device_kind for d in devs] != params["device_kinds"]
            or [getattr(d, "process_index", 0) for d in devs] != params["process_indices"]
            or all(getattr(d, "process_index", 0) != me for d in devs)
        ):
            return None
        return devs

    def usable(params: dict) -> bool:
        # Deserializing with another backend's, build's or configuration's options can
        # abort the process inside XLA: only ever load what was written for this one.
        try:
            return (
                params.get("v") == LOAD_PARAMS_VERSION
                and params["platform"] == backend.platform
                and params["platform_version"] == backend.platform_version
                and params["jax"] == jax.__version__
                and params["jaxlib"] == jaxlib.__version__
                and params["env"] == env
                # This thread builds compile options from the configuration it sees,
                # which must be the one the main thread keyed with.
                and _environment(backend)[1] == env
                and chosen(params) is not None
            )
        except (KeyError, TypeError, AttributeError):
            return False

    def load(raw: bytes, params: dict, replay):
        if not usable(params):
            return None
        predicted = dict(
            env=params["env"],
            tuple_args=bool(params["tuple_args"]),
            allow_in=tuple(bool(b) for b in params["allow_in"]),
            allow_out=tuple(bool(b) for b in params["allow_out"]),
            device_list=_pxla._create_device_list(tuple(chosen(params))),
            compiler_options_kvs=tuple((k, v) for k, v in params["compiler_options"]),
        )
        return _load_entry(raw, replay, backend, predicted), _load_signature(predicted)

    return usable, load


def _deserialize(raw: bytes, backend, predicted):
    device_list = predicted["device_list"]
    options = _compile_options(backend, predicted)
    return backend.deserialize_executable(raw, device_list, options)


def _compile_options(backend, predicted):
    device_list = predicted["device_list"]
    dev = np.array(list(device_list), dtype=object).reshape((1, len(device_list)))
    options = _compiler.get_compile_options(
        num_replicas=1,
        num_partitions=len(device_list),
        device_assignment=dev,
        env_options_overrides=dict(predicted["compiler_options_kvs"]),
        backend=backend,
    )
    options.parameter_is_tupled_arguments = predicted["tuple_args"]
    build = options.executable_build_options
    build.allow_spmd_sharding_propagation_to_parameters = list(predicted["allow_in"])
    build.allow_spmd_sharding_propagation_to_output = list(predicted["allow_out"])
    return options


def _compilation_wrapper(computation, *rest):
    """`_cached_compilation` on 0.10.x."""
    (name, tuple_args, allow_in, allow_out, host_callbacks, backend, da,
     compiler_options_kvs, pgle_profiler) = rest  # fmt: skip
    return _compile(
        computation, name, tuple_args, allow_in, allow_out, host_callbacks, backend, da,
        compiler_options_kvs, pgle_profiler, lambda comp: _ORIG["compile"](comp, *rest),
    )  # fmt: skip


def _compilation_wrapper_v09(computation, *rest):
    """`_cached_compilation` on 0.9.x (extra mesh/spmd/auto-spmd/pmap_nreps inputs)."""
    (name, mesh, spmd_lowering, tuple_args, auto_spmd_lowering, allow_in, allow_out,
     host_callbacks, backend, da, pmap_nreps, compiler_options_kvs, pgle_profiler) = rest  # fmt: skip

    def call_orig(comp):
        return _ORIG["compile"](comp, *rest)

    if pmap_nreps != 1 or auto_spmd_lowering or not spmd_lowering or mesh is not None:
        # Not the plain SPMD compile a key predicts (jit-of-pmap, auto-SPMD): compile
        # the real module, uncached.
        keyed = isinstance(computation, _Prefetched)
        if keyed:
            computation = computation.materialize()
        with _PENDING_LOCK:
            keyed = _PENDING.pop(computation, None) is not None or keyed
        rt = _RT
        if keyed and rt is not None:
            rt.bypass("compile-inputs", f"{name}: 0.9 non-SPMD or auto-SPMD compile")
        return call_orig(computation)
    return _compile(
        computation, name, tuple_args, allow_in, allow_out, host_callbacks, backend, da,
        compiler_options_kvs, pgle_profiler, call_orig,
    )  # fmt: skip


def _compile(
    computation,
    name,
    tuple_args,
    allow_in,
    allow_out,
    host_callbacks,
    backend,
    da,
    compiler_options_kvs,
    pgle_profiler,
    call_orig,
):
    t0 = time.time()
    actual = dict(
        tuple_args=tuple_args,
        allow_in=tuple(allow_in),
        allow_out=tuple(allow_out),
        device_list=da,
        compiler_options_kvs=compiler_options_kvs,
    )

    def same(predicted, callbacks):
        return (
            _same_objects(host_callbacks, callbacks)
            and pgle_profiler is None
            and all(predicted[k] == v for k, v in actual.items())
        )

    if isinstance(computation, _Prefetched):
        if same(computation.predicted, computation.host_callbacks):
            # The record JAX's `_cached_compilation` logs around its compile (and, on
            # a JAX persistent-cache hit, around the cache read): logged, not timed as
            # a backend compile (no monitoring event: no compile happened).
            _log_finished_compile(name, t0)
            return computation.executable
        # AOT `.compile(compiler_options=...)` or another device assignment:
        # not what was keyed. Lower for real and take the miss path below.
        key = _with_compile_parts(
            computation.key,
            _compile_parts(tuple_args, allow_in, allow_out, da, compiler_options_kvs),
        )
        pending = _Pending(
            key,
            actual,
            name,
            computation.keepalive,
            computation.host_callbacks,
            computation.loaded.replay,
        )
        computation = computation.materialize()
    else:
        with _PENDING_LOCK:
            pending = _PENDING.pop(computation, None)
        if pending is not None and not same(pending.predicted, pending.host_callbacks):
            key = _with_compile_parts(
                pending.key,
                _compile_parts(tuple_args, allow_in, allow_out, da, compiler_options_kvs),
            )
            pending = pending._replace(key=key, predicted=dict(pending.predicted, **actual))
    rt = _RT
    if pending is None or rt is None or pgle_profiler is not None:
        return call_orig(computation)
    key, predicted, fun_name, keepalive, callbacks, replay = pending
    if not _same_objects(host_callbacks, callbacks):
        return call_orig(computation)

    def compile_fn():
        from pcache._cache import Compiled

        t0 = time.perf_counter()
        with _hlo_seam_off():
            exe = call_orig(computation)
        secs = time.perf_counter() - t0
        raw = None
        if key.persistent:
            try:
                raw = (
                    exe.serialize()
                    if hasattr(exe, "serialize")
                    else backend.serialize_executable(exe)
                )
            except Exception as exc:  # some backends cannot serialize: memory tier only
                rt.error("serialize", exc)
        module = None if key.persistent else computation
        return Compiled(_loaded(exe, keepalive, callbacks, module, replay), raw, secs)

    meta = _entry_meta(backend, da, fun_name)
    meta["extra"]["replay"] = replay.to_json()
    ws = None
    try:
        params = _load_params(backend, predicted)
        if params is not None:
            meta["extra"]["load"] = params
        ws = _working_set_name(backend) if key.persistent else None
    except Exception as exc:  # preloading is a speedup: never let it cost the compile
        rt.background_error("preload parameters", exc)
    loaded = rt.compile_through(
        key,
        compile_fn,
        lambda raw, replay: _load_entry(raw, replay, backend, predicted),
        meta,
        lambda signature: signature == _load_signature(predicted),
        ws,
    )
    return loaded.executable


def _log_finished_compile(name, t0: float) -> None:
    priority = logging.WARNING if _config.log_compiles.value else logging.DEBUG
    if _dispatch.logger.isEnabledFor(priority):
        _dispatch.logger.log(
            priority, f"Finished XLA compilation of {name} in {time.time() - t0:.9f} sec"
        )


def _same_objects(a, b) -> bool:
    """Same callbacks, by identity (they are process-local objects)."""
    a, b = tuple(a or ()), tuple(b or ())
    return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))


def _entry_meta(backend, da, fun_name) -> dict[str, Any]:
    d0 = da[0]
    return {
        "backend": backend.platform,
        "device_kind": d0.device_kind,
        "jax_version": jax.__version__,
        "jaxlib_version": jaxlib.__version__,
        "function_name": str(fun_name),
        "extra": {
            "platform_version": backend.platform_version,
            "device_ids": [d.id for d in da],
            "num_devices": len(da),
        },
    }


def _stablehlo_wrapper(self):
    hlo = self._hlo
    if isinstance(hlo, _Prefetched):
        return hlo.materialize()
    return hlo


# ----------------------------------------------------------- HLO-level seam


_HLO_OFF = contextvars.ContextVar("pcache_hlo_off", default=False)


@contextlib.contextmanager
def _hlo_seam_off():
    token = _HLO_OFF.set(True)
    try:
        yield
    finally:
        _HLO_OFF.reset(token)


def _compile_or_get_cached_wrapper(
    backend,
    computation,
    devices,
    compile_options,
    host_callbacks,
    executable_devices,
    pgle_profiler=None,
):
    """`compiler.compile_or_get_cached` served from pcache's store.

    Every compile the jit seam does not key (pmap, a jit seam bypass, compiles on a
    JAX line outside `SUPPORTED`) reaches this with a lowered module: keyed as JAX's
    own persistent cache keys it (`compilation_cache.get_cache_key`), stored in the
    same store. Passes through when JAX's own persistent cache is configured (the
    user chose it for these compiles), for host callbacks (process-local, as JAX
    refuses them too) and profile-guided compiles. JAX's configuration and its
    cache object are left as they are.
    """

    def call():
        return _ORIG["compile_or_get_cached"](
            backend,
            computation,
            devices,
            compile_options,
            host_callbacks,
            executable_devices,
            pgle_profiler,
        )

    rt = _RT
    if (
        rt is None
        or _HLO_OFF.get()
        or host_callbacks
        or pgle_profiler is not None
        or _jax_cache_configured()
    ):
        return call()
    try:
        key = _cc.get_cache_key(computation, devices, compile_options, backend)
        raw = rt.hlo_get(key)
        exe = None
        if raw is not None:
            exe = backend.deserialize_executable(raw, executable_devices, compile_options)
    except Exception as exc:
        rt.error("hlo lookup", exc)
        return call()
    if exe is not None:
        return exe
    with _hlo_seam_off():
        exe = call()
    try:
        name = str(computation.operation.attributes["sym_name"]).strip('"')
        raw = exe.serialize() if hasattr(exe, "serialize") else backend.serialize_executable(exe)
        rt.hlo_put(key, raw, _entry_meta(backend, list(executable_devices), name))
    except Exception as exc:  # some backends cannot serialize: nothing stored
        rt.error("hlo store", exc)
    return exe


def _jax_cache_configured() -> bool:
    """Whether the user has pointed JAX's own persistent cache at a directory
    (`jax_enable_compilation_cache` alone is True by default and means nothing
    without one)."""
    return bool(_config.enable_compilation_cache.value) and (
        _config.compilation_cache_dir.value is not None or _cc._cache is not None
    )


# ------------------------------------------------------------- install / remove


class _CacheClearProxy:
    """Replaces a JAX cached function; keeps `cache_clear()` working for `jax.clear_caches`."""

    def __init__(self, fn, orig) -> None:
        self._fn, self._orig = fn, orig

    def __call__(self, *args, **kwargs):
        return self._fn(*args, **kwargs)

    def cache_clear(self) -> None:
        self._orig.cache_clear()

    def cache_info(self):
        return self._orig.cache_info()


class _ClearHook:
    """Registered with JAX's cache management (`util.register_cache`), so
    `jax.clear_caches()` also empties pcache's in-process state; `jit(f).clear_cache()`
    does too (pcache cannot tell which entries were f's: it drops them all, and the
    store serves them again). Nothing of a cleared program stays alive in pcache."""

    def cache_clear(self) -> None:
        clear_in_memory()

    def cache_info(self):
        return None

    def cache_keys(self):
        return ()


_CLEAR_HOOK = _ClearHook()  # referenced here: JAX's registry holds it weakly


def clear_in_memory() -> None:
    """Drop the memory tier, unused preloads and every in-process memo."""
    rt = _RT
    if rt is not None:
        rt.clear_memory()
    _CONTEXT_MEMO.clear()
    _COMPUTATIONS.clear()
    _ENV_CACHE.clear()
    _RULE_KEYS.clear()
    _SET_NAMES.clear()
    if "lower" in _ORIG:
        _canon_module().clear_caches()


def _jit_evict_wrapper(self):
    _ORIG["jit_evict"](self)
    clear_in_memory()


_INSTALL_LOCK = threading.Lock()


def install(rt) -> None:
    """Point the seams at runtime `rt` (idempotent)."""
    global _RT
    with _INSTALL_LOCK:
        _RT = rt
        if jit_seam_supported():
            _install_jit_seam()
        else:
            logger.warning(
                "pcache: JAX %s is outside the versions whose jit seam pcache knows "
                "(%s to %s, exclusive); only the HLO-level seam is used, so tracing and "
                "lowering are not skipped.",
                jax.__version__,
                SUPPORTED[0],
                SUPPORTED[1],
            )
        _install_hlo_seam()


def uninstall() -> None:
    global _RT
    with _INSTALL_LOCK:
        _RT = None
        # The wrappers stay in place and pass straight through with no runtime:
        # executables already handed to JAX's own caches keep working.


def _install_hlo_seam() -> None:
    if "compile_or_get_cached" in _ORIG or _compiler is None:
        return
    _ORIG["compile_or_get_cached"] = _compiler.compile_or_get_cached
    _compiler.compile_or_get_cached = _compile_or_get_cached_wrapper


def _install_jit_seam() -> None:
    if "lower" in _ORIG:
        return
    _install_warning_hook()
    # pcache's wrapper frames are not user code: keep them out of filtered
    # tracebacks and out of the source locations JAX writes into the HLO.
    from jax._src import source_info_util, traceback_util

    here = os.path.dirname(os.path.abspath(__file__))
    traceback_util.register_exclusion(here)
    source_info_util.register_exclusion(here)
    from jax._src import util as _util

    _util.register_cache(_CLEAR_HOOK, "pcache (memory tier and memos)")
    _ORIG.update(
        jit_evict=_pjit.jit_evict_fn,
        pjit_lower=_pjit._pjit_lower,
        lsc=_pxla.lower_sharding_computation,
        devices=_pxla._get_and_check_device_assignment,
        lower=_pxla._cached_lowering_to_hlo,
        compile=_pxla._cached_compilation,
        stablehlo=_pxla.MeshComputation.stablehlo,
    )
    _pjit.jit_evict_fn = _jit_evict_wrapper
    _pjit._pjit_lower = _CacheClearProxy(_pjit_lower_wrapper, _ORIG["pjit_lower"])
    _pxla.lower_sharding_computation = _lsc_wrapper
    _pxla._get_and_check_device_assignment = _device_assignment_wrapper
    _pxla._cached_lowering_to_hlo = _CacheClearProxy(_lowering_wrapper, _ORIG["lower"])
    compile_wrapper = _compilation_wrapper_v09 if _v09() else _compilation_wrapper
    _pxla._cached_compilation = _CacheClearProxy(compile_wrapper, _ORIG["compile"])
    _pxla.MeshComputation.stablehlo = _stablehlo_wrapper


# ------------------------------------------------------------- fingerprint API


def fingerprint(fun, args, kwargs) -> CacheKey:
    """The key `jax.jit(fun)(*args, **kwargs)` would be cached under, without lowering."""
    if not jit_seam_supported():
        raise Uncacheable("unsupported-jax", f"JAX {jax.__version__}")
    _install_jit_seam()
    jitted = fun if hasattr(fun, "trace") and hasattr(fun, "lower") else jax.jit(fun)
    traced = jitted.trace(*args, **kwargs)
    p = traced._params
    meta = traced._meta_tys_flat
    jaxpr = p["jaxpr"]
    in_shardings = _pjit._resolve_in_shardings(meta, p["in_shardings"])
    in_layouts = _pjit._resolve_in_layouts(meta, p["in_layouts"], in_shardings, jaxpr.in_avals)
    out_layouts = _pjit._resolve_out_layouts(p["out_layouts"], p["out_shardings"], jaxpr.out_avals)
    token = _PROBE.set(True)
    try:
        _pxla.lower_sharding_computation(
            jaxpr,
            "jit",
            p["name"],
            in_shardings,
            p["out_shardings"],
            in_layouts,
            out_layouts,
            tuple(p["donated_invars"]),
            keep_unused=p["keep_unused"],
            context_mesh=p["ctx_mesh"],
            compiler_options_kvs=p["compiler_options_kvs"],
            lowering_platforms=None,
            lowering_parameters=_mlir.LoweringParameters(),
            pgle_profiler=None,
        )
    except _ProbeResult as res:
        return res.key
    finally:
        _PROBE.reset(token)
    raise Uncacheable("not-lowered", "JAX did not reach the lowering seam for this call")


# --- begin: names used by _canon
# Private JAX names that pcache._canon needs to canonicalize jaxprs. Each is pinned to
# the jax/jaxlib version (which is part of every key), so a rename shows up as an
# ImportError here rather than as a silent change of meaning in _canon.
# On a JAX line outside SUPPORTED these names may not exist: _canon is then never
# imported (the jit seam is not installed and fingerprint() raises Uncacheable).
try:
    from jax._src import cache_key as _canon_cache_key  # noqa: E402, F401
    from jax._src import config as _canon_config  # noqa: E402, F401
    from jax._src import core as _canon_core  # noqa: E402, F401
    from jax._src.callback import _FlatCallback as FlatCallback  # noqa: E402, F401
    from jax._src.layout import Format, Layout  # noqa: E402, F401
    from jax._src.mesh import AbstractMesh, Mesh  # noqa: E402, F401
    from jax._src.named_sharding import UnspecifiedValue  # noqa: E402, F401
    from jax._src.sharding_impls import GSPMDSharding, SingleDeviceSharding  # noqa: E402, F401
    from jaxlib._jax import Device, PyTreeDef  # noqa: E402, F401

    if _v09():
        # 0.9: the auto-layout type is `AutoLayout` (Layout.AUTO is an instance of it);
        # the PRNG module is jax._src.prng.
        from jax._src.layout import AutoLayout as AutoLayoutSingleton  # noqa: E402, F401
        from jax._src.prng import KeyTy, PRNGImpl  # noqa: E402, F401
        from jax._src.prng import prngs as registered_prng_impls  # noqa: E402, F401
    else:
        from jax._src.layout import AutoLayoutSingleton  # noqa: E402, F401
        from jax._src.random.prng import KeyTy, PRNGImpl  # noqa: E402, F401
        from jax._src.random.prng import prngs as registered_prng_impls  # noqa: E402, F401
except ImportError:  # pragma: no cover - other JAX lines
    pass


class _AbsentOnThisLine:
    """Stands for a JAX type this line does not have: no object is ever an instance."""


# JAX's host-side literal arrays (0.10: `literals.TypedNdArray`, a numpy view).
try:
    from jax._src.literals import TypedNdArray  # noqa: E402
except ImportError:  # 0.9: literals hold plain numpy arrays
    TypedNdArray = _AbsentOnThisLine


def literal_buffer_is_private(a) -> bool:
    """True when no object but ``a`` can reach the memory ``a`` views, so its content
    cannot change: ``a`` is a literal array JAX made itself while tracing (a
    TypedNdArray: user code never holds one) viewing an owner array that nothing
    else refers to (a Python scalar JAX turned into an array). A view of a user's
    array is not private: the user's reference counts too (numpy points every view
    at the owner).
    """
    if type(a) is not TypedNdArray:
        return False
    base = a.base
    return (
        type(base) is np.ndarray
        and base.base is None
        # references: a.base, this local, getrefcount's argument; nothing else
        and sys.getrefcount(base) == 3
    )


DropVar = _canon_core.DropVar
# The same classes jax.extend.core re-exports; importing jax.extend costs ~20 ms
# (it imports Pallas), which a warm process would pay on its first jit call.
Jaxpr = _canon_core.Jaxpr
ClosedJaxpr = _canon_core.ClosedJaxpr
Literal = _canon_core.Literal
Var = _canon_core.Var
JaxprEqnContext = _canon_core.JaxprEqnContext
ShapedArray = _canon_core.ShapedArray
AbstractToken = _canon_core.AbstractToken
# 0.9 has no ManualAxisType (added in 0.10).
ManualAxisType = getattr(_canon_core, "ManualAxisType", _AbsentOnThisLine)
AxisEnv = _canon_core.AxisEnv

# XLA_FLAGS that JAX's own persistent cache leaves out of its key (dump/debug flags).
xla_flags_to_exclude_from_cache_key = _canon_cache_key.xla_flags_to_exclude_from_cache_key
xla_flag_prefixes = _canon_cache_key.get_flag_prefixes


def trace_context_items() -> list[tuple[str, object]]:
    """(name, value) of every config/context value JAX keys its own trace caches on."""
    values = _canon_config.trace_context()
    if _v09():
        # 0.9's jaxlib cannot name them: key by position (the order is fixed for a
        # jax/jaxlib version, and both versions are in every key).
        return [(f"trace_context[{i}]", v) for i, v in enumerate(values)]
    return list(zip(_canon_config.trace_context_names(), values, strict=True))


def config_value(name: str):
    """Current value of a JAX config option or flag by name (``jax_enable_x64``).

    Reads the value holder, which covers both `State` options and plain flags
    (``jax_disable_most_optimizations`` is a flag with no `config.<name>` attribute).
    """
    return _canon_config.config._value_holders[name].value


class RuleKey(NamedTuple):
    """How a primitive lowers, as far as a key can tell.

    ``entries``: the registered lowering-rule entries (default, then per platform)
    the verdict was taken on, kept alive so their identities stay theirs.
    ``persistent``: every callable the rules reach is JAX's own code (so the
    primitive's name, JAX's version and ``token`` identify the lowering in any
    process). ``token``: a digest of the rules' structure (which JAX functions,
    partial arguments, closure values) when persistent, else a token unique to these
    rule objects in this process.
    """

    entries: tuple
    persistent: bool
    token: str


_RULE_KEYS: dict = {}  # Primitive -> RuleKey, revalidated by entry identity on each use
_JAX_MODULES = ("jax.", "jaxlib.")


def lowering_registries() -> tuple[dict, ...]:
    """JAX's lowering-rule registries: the default one, then one per platform."""
    return (_mlir._lowerings, *_mlir._platform_specific_lowerings.values())


def lowering_entries(prim) -> tuple:
    """The lowering-rule entries registered for ``prim`` now (default, per platform)."""
    return tuple(d.get(prim) for d in lowering_registries())


def lowering_rule_key(prim) -> RuleKey:
    """The `RuleKey` of ``prim``'s lowering rules as registered now.

    The canonical form names a primitive; its lowering is what the executable is made
    of. A rule reaching user code (a custom primitive, `mlir.lower_fun` over a user
    function, a monkeypatched rule) makes the key process-local and names the rule
    objects; a rule of JAX's own code is named by its structure, so registering
    another JAX rule for a primitive (``register_lowering(sin_p, cos_rule)``) changes
    the key in this process and in the next. Memoized per primitive, revalidated by
    the identity of the registered entries (kept alive by the memo).
    """
    from pcache import _canon

    entries = lowering_entries(prim)
    if _canon.memos_on():
        got = _RULE_KEYS.get(prim)
        if (
            got is not None
            and len(got.entries) == len(entries)  # a platform may have been added
            and all(a is b for a, b in zip(got.entries, entries, strict=True))
        ):
            return got
    platforms = ("*", *_mlir._platform_specific_lowerings)
    present = [(p, e) for p, e in zip(platforms, entries, strict=True) if e is not None]
    described = [_describe_rule(e.rule, 0) for _, e in present]
    if None in described:
        # Named by the rule functions' identity (a token never reused in this process).
        token = ";".join(
            f"{p}:{_canon.local_token(e.rule)}:{bool(getattr(e, 'inline', False))}"
            for p, e in present
        )
        key = RuleKey(entries, False, _h(token.encode())[:32])
    else:
        parts = [
            f"{p}:{d}:{bool(getattr(e, 'inline', False))}"
            for (p, e), d in zip(present, described, strict=True)
        ]
        key = RuleKey(entries, True, _h(";".join(parts).encode())[:32])
    if _canon.memos_on():
        if len(_RULE_KEYS) > 4096:
            _RULE_KEYS.clear()
        _RULE_KEYS[prim] = key
    return key


def _jax_module(name) -> bool:
    return isinstance(name, str) and (name == "jax" or name.startswith(_JAX_MODULES))


def _describe_rule(obj, depth: int) -> str | None:
    """A deterministic description of a lowering rule reaching only JAX's own code
    (functions by module and qualified name, with their closure values, defaults
    and partial arguments), or None if it reaches anything else."""
    import enum
    import functools
    import types

    if depth > 8:
        return None
    t = type(obj)
    if obj is None or t in (bool, int, float, complex, str, bytes):
        return repr(obj)
    if t in (tuple, list, frozenset):
        items = [
            _describe_rule(v, depth + 1) for v in (sorted(obj, key=repr) if t is frozenset else obj)
        ]
        return None if None in items else f"{t.__name__}({','.join(items)})"
    if t is dict:
        items = [(repr(k), _describe_rule(v, depth + 1)) for k, v in obj.items()]
        if any(d is None for _, d in items) or not all(type(k) is str for k in obj):
            return None
        return "dict(" + ",".join(f"{k}:{d}" for k, d in sorted(items)) + ")"
    if isinstance(obj, enum.Enum):
        return f"enum:{t.__module__}.{t.__qualname__}.{obj.name}"
    if isinstance(obj, functools.partial):
        items = [_describe_rule(v, depth + 1) for v in (obj.func, *obj.args)]
        kws = [(k, _describe_rule(v, depth + 1)) for k, v in sorted(obj.keywords.items())]
        if None in items or any(d is None for _, d in kws):
            return None
        return f"partial({','.join(items)};{','.join(f'{k}={d}' for k, d in kws)})"
    if isinstance(obj, types.FunctionType):
        if not _jax_module(obj.__module__):
            return None
        items = []
        for cell in obj.__closure__ or ():
            try:
                items.append(_describe_rule(cell.cell_contents, depth + 1))
            except ValueError:  # an empty cell
                items.append("<empty>")
        items += [_describe_rule(v, depth + 1) for v in obj.__defaults__ or ()]
        kwd = obj.__kwdefaults__ or {}
        kws = [(k, _describe_rule(kwd[k], depth + 1)) for k in sorted(kwd)]
        if None in items or any(d is None for _, d in kws):
            return None
        body = ",".join(items) + ";" + ",".join(f"{k}={d}" for k, d in kws)
        return f"fn:{obj.__module__}.{obj.__qualname__}({body})"
    if isinstance(obj, types.MethodType):
        f, me = _describe_rule(obj.__func__, depth + 1), _describe_rule(obj.__self__, depth + 1)
        return None if f is None or me is None else f"method({f};{me})"
    if isinstance(obj, type):
        return f"cls:{obj.__module__}.{obj.__qualname__}" if _jax_module(obj.__module__) else None
    if isinstance(obj, (types.BuiltinFunctionType, types.BuiltinMethodType)):
        owner = getattr(obj, "__self__", None)
        if owner is not None and not isinstance(owner, types.ModuleType):
            return None  # a method bound to some object
        return f"builtin:{getattr(obj, '__module__', None)}.{obj.__qualname__}"
    if not _jax_module(t.__module__):
        return None
    if isinstance(obj, _canon_core.Primitive):
        return f"prim:{obj.name}"
    # A JAX object (a config holder, custom_partitioning...): its type and state.
    state = dict(vars(obj)) if hasattr(obj, "__dict__") else {}
    for klass in t.__mro__:
        for slot in getattr(klass, "__slots__", ()):
            if slot not in ("__weakref__", "__dict__") and hasattr(obj, slot):
                state.setdefault(slot, getattr(obj, slot))
    items = [(k, _describe_rule(v, depth + 1)) for k, v in sorted(state.items())]
    if any(d is None for _, d in items):
        return None
    return f"obj:{t.__module__}.{t.__qualname__}(" + ",".join(f"{k}={d}" for k, d in items) + ")"


def partition_spec_entries(p) -> tuple:
    """A PartitionSpec's entries: 0.10 forbids iterating a spec with unreduced or
    reduced axes (its `partitions` are the entries); 0.9 keeps them in `_partitions`."""
    if _v09():
        return tuple(p._partitions)
    return tuple(p.partitions)


def named_sharding_logical_device_ids(s):
    """NamedSharding's optional device-id permutation (None in the common case)."""
    return getattr(s, "_logical_device_ids", None)


def abstract_device_platform(ad):
    """An AbstractMesh's abstract device's platform (0.9's AbstractDevice has none)."""
    return None if _v09() else ad.platform


def gspmd_sharding_devices(s) -> tuple:
    """A GSPMDSharding's device assignment, in order."""
    return tuple(s._device_assignment)


def gspmd_sharding_proto(s) -> bytes:
    """Serialized OpSharding proto of a GSPMDSharding."""
    return s._hlo_sharding.to_proto().SerializeToString()


# --- end: names used by _canon
