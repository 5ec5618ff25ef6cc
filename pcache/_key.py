"""Cache keys: what they are (`CacheKey`) and how one is built.

Like JAX's own cache key, a key is a sequence of named parts so that a miss can be
explained part by part (``CacheKey.diff``/``describe``). `lowering_key` builds the
key of one lowering: the jaxpr's canonical digest (`pcache._canon`), every other
lowering and compile input, and the environment (`environment_parts`: versions,
XLA flags as XLA parsed them, JAX's configuration).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import sys
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from pcache import _canon, _compat, _config, _memos
from pcache._errors import Uncacheable
from pcache._introspect import typed

__all__ = [
    "CacheKey",
    "Predicted",
    "compile_parts",
    "environment",
    "environment_parts",
    "lowering_key",
]

_KEY_DOMAIN = b"pcache-key-1\n"


@dataclass(frozen=True)
class CacheKey:
    """An ordered tuple of ``(name, hex digest of that part)``.

    ``persistent`` is False when some part identifies process-local objects (Python
    callback functions, by identity): such a key is valid for the memory tier only.
    """

    parts: tuple[tuple[str, str], ...]
    persistent: bool = True
    #: Why the key is valid in this process only (`JaxprDigest.why`); "" if persistent.
    local_why: str = field(default="", compare=False)
    #: `JaxprDigest.relower`: this key is completed by the lowered module
    #: (`with_module`) before any tier is asked; every hit lowers.
    relower: bool = False
    _digest: list = field(default_factory=list, init=False, repr=False, compare=False)

    @property
    def digest(self) -> str:
        """sha256 over the ordered (name, part-hash) pairs, hex."""
        if not self._digest:
            h = hashlib.sha256(_KEY_DOMAIN)
            for name, part in self.parts:
                # Length-prefix the name so ("ab","c") and ("a","bc") differ.
                nb = name.encode()
                h.update(len(nb).to_bytes(4, "little") + nb + bytes.fromhex(part))
            self._digest.append(h.hexdigest())
        return self._digest[0]

    def describe(self) -> str:
        """One line per part: name and hash (debug view)."""
        width = max((len(n) for n, _ in self.parts), default=0)
        lines = [f"{n:<{width}}  {p}" for n, p in self.parts]
        lines.append(
            f"{'=> key':<{width}}  {self.digest}" + ("" if self.persistent else " (local)")
        )
        return "\n".join(lines)

    def diff(self, other: CacheKey) -> list[str]:
        """Names of parts that differ (present in one key only, or with other hashes)."""
        mine, theirs = dict(self.parts), dict(other.parts)
        names = [n for n, _ in self.parts] + [n for n, _ in other.parts if n not in mine]
        return [n for n in names if mine.get(n) != theirs.get(n)]


def _h(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _vd(obj: Any) -> str:
    return _canon.value_digest(obj).hex()


# ----------------------------------------------------------------------------
# Environment


# JAX config values read while tracing/lowering that are not in trace_context().
# (trace_context() covers x64, default matmul precision, threefry_partitionable,
# shardy, simplified constants, embedded_constants_max_bytes, numpy dtype/rank
# promotion, debug_key_reuse, pgle, ragged-dot lowering, ... see environment_parts.)
_EXTRA_CONFIGS = (
    "jax_default_prng_impl",  # new-style keys carry it in the dtype; old-style don't
    "jax_ragged_dot_use_ragged_dot_instruction",  # read by ragged_dot lowering
    "jax_enable_checks",  # adds checks during tracing
    "jax_debug_nans",  # debug modes change dispatch/compilation
    "jax_debug_infs",
    # compile-option knobs (the executable differs); also in CompileOptions, kept here
    # so a key never depends on the caller remembering them.
    "jax_optimization_level",
    "jax_memory_fitting_level",
    "jax_exec_time_optimization_effort",
    "jax_memory_fitting_effort",
    # flags read by compiler.get_compile_options (optimization level 0 / no remat pass)
    "jax_disable_most_optimizations",
    "jax_compiler_enable_remat_pass",
    "jax_xla_profile_version",
    # read after tracing, where JAX lowers a jit (Refs discharged to pins or not; a
    # checkify error raised by the runtime or by a host callback: review 99)
    "jax_refs_to_pins",
    "jax_experimental_unsafe_xla_runtime_errors",
    # decide whether lowering warns about captured constants, and what the warning
    # says (a hit replays the warnings of the lowering it skips: they must be the ones
    # this setting would have issued)
    "jax_captured_constants_warn_bytes",
    "jax_captured_constants_report_frames",
)


def extra_config_values() -> tuple:
    """The current values of ``_EXTRA_CONFIGS``: part of any memo of environment_parts."""
    # (each with its exact type: a memo keyed by ``0`` must not answer ``False``)
    return typed(tuple(_compat.config_value(n) for n in _EXTRA_CONFIGS))


# Deliberately left out: jax_include_full_tracebacks_in_locations and
# jax_traceback_in_locations_limit (MLIR locations only: debug metadata), logging and
# cache-management options (log_compiles, compilation_cache_*, explain_cache_misses).


def _xla_flags() -> list[str]:
    """XLA flags as XLA itself parsed them, normalized.

    From XLA_FLAGS and LIBTPU_INIT_ARGS as they were when the backends started
    (XLA parses them once, at client creation: an edit of ``os.environ`` afterwards
    changes nothing in what is compiled, so it must change nothing in the key), and
    --xla* argv, minus the dump/debug flags JAX's own cache key excludes. Parsed the
    way XLA parses them: a repeated flag's last value wins (``--f=true --f=false`` is
    ``--f=false``), ``--f`` is ``--f=true`` and ``--nof`` is ``--f=false``. JAX also
    excludes --xla_force_host_platform_device_count: the device assignment is keyed
    separately, and pcache does the same.
    """
    flags: list[str] = []
    for value in _config.flag_env_at_backend_start().values():
        if value:
            flags.extend(value.split())
    prefixes = list(_compat.xla_flag_prefixes())
    for arg in sys.argv:
        if arg.startswith("--xla") or any(arg.startswith(p) for p in prefixes):
            flags.append(arg)
    excluded = set(_compat.xla_flags_to_exclude_from_cache_key)
    last: dict[str, str] = {}
    for f in flags:
        name, eq, value = f.partition("=")
        if not eq:
            if name.startswith("--no") and name[4:].startswith("xla"):
                name, value = "--" + name[4:], "false"
            else:
                value = "true"
        last.pop(name, None)  # re-insert: the order no longer matters, the value does
        last[name] = value
    return sorted(f"{n}={v}" for n, v in last.items() if n not in excluded)


def environment_parts(backend: Any) -> list[tuple[str, bytes]]:
    """Key parts describing the software/config environment, in a fixed order.

    * ``jax`` / ``jaxlib``: versions (the canonical form itself is version-specific);
    * ``platform``: backend.platform and platform_version (compiler/runtime build);
    * ``xla_flags``: see ``_xla_flags``;
    * ``trace_context``: every (name, value) of jax's ``config.trace_context()``, which
      is what JAX keys its own jit/trace caches on: x64, default matmul precision,
      threefry_partitionable, use_shardy_partitioner, use_simplified_jaxpr_constants,
      embedded_constants_max_bytes, numpy dtype promotion, default device, mesh and
      abstract-mesh contexts, compute_on / xla_metadata contexts, axis env, ...;
      values are canonicalized; an object without a canonical form raises Uncacheable;
    * ``jax_config``: the ``_EXTRA_CONFIGS`` values lowering/compilation reads that
      are not in the trace context;
    * ``canon``: the canonical-form version.
    """
    tc = ";".join(f"{n}={_canon.encode_env_value(n, v)}" for n, v in _compat.trace_context_items())
    extra = ";".join(
        f"{n}={_canon.encode_env_value(n, _compat.config_value(n))}" for n in _EXTRA_CONFIGS
    )
    return [
        ("canon", _canon.CANON_VERSION.encode()),
        ("jax", _compat.JAX_VERSION.encode()),
        ("jaxlib", _compat.JAXLIB_VERSION.encode()),
        (
            "platform",
            f"{_canon.canonicalize(backend.platform)};"
            f"{_canon.canonicalize(backend.platform_version)}".encode(),
        ),
        ("xla_flags", json.dumps(_xla_flags()).encode()),
        ("trace_context", tc.encode()),
        ("jax_config", extra.encode()),
    ]


# (id(backend), trace context, other config values) -> (backend, parts, hash).
# Sound: the key holds every input environment_parts reads that can change in a
# running process (trace_context(): x64, matmul precision...; the config values
# outside it: optimization level...); XLA's flags are those of backend start-up,
# fixed for the process; the backend is kept in the value and compared by
# identity, so a recycled id() (after jax.clear_backends) never matches.
_ENV_CACHE: dict[tuple, tuple[Any, list[tuple[str, str]], str]] = _memos.memo("key.environment", {})


def environment(backend) -> tuple[list[tuple[str, str]], str]:
    """The environment key parts (versions, XLA flags, JAX configuration) and one
    hash of them all: what a preloaded entry must have been written under."""
    memo_key = (id(backend), _compat.trace_context(), extra_config_values())
    try:
        got = _ENV_CACHE.get(memo_key) if _canon.memos_on() else None
    except TypeError:  # an unhashable config value: recompute each time
        got, memo_key = None, None
    if got is None or got[0] is not backend:
        parts = [(name, _h(data)) for name, data in environment_parts(backend)]
        got = (backend, parts, _h("".join(f"{name}={h};" for name, h in parts).encode()))
        if memo_key is not None and _canon.memos_on():
            if len(_ENV_CACHE) > 64:
                _ENV_CACHE.clear()  # (each recorded trace's context is another memo key)
            _ENV_CACHE[memo_key] = got
    return got[1], got[2]


def _device_part(device_list) -> str:
    # The executable is built for exactly these devices: ids and kinds go in the key.
    return _vd(
        tuple(
            (d.id, d.platform, d.device_kind, getattr(d, "process_index", 0)) for d in device_list
        )
    )


def typed_options(kvs: Any) -> tuple:
    """Compiler options compared exactly: with ``==``, ``True == 1 == 1.0``, and XLA
    accepts only one of them for a boolean option."""
    return tuple((type(k), k, type(v), v) for k, v in kvs)


def compile_parts(tuple_args, allow_in, allow_out, device_list, compiler_options_kvs):
    return [
        ("tuple_args", _vd(bool(tuple_args))),
        ("allow_prop_in", _vd(tuple(bool(b) for b in allow_in))),
        ("allow_prop_out", _vd(tuple(bool(b) for b in allow_out))),
        ("devices", _device_part(device_list)),
        # XLA applies repeated options last-one-wins (`dict(kvs)`); deduplicate the
        # same way before sorting, or (o=F, o=T) and (o=T, o=F) would share a key.
        ("compiler_options", _vd(tuple(sorted(dict(compiler_options_kvs).items())))),
    ]


@dataclasses.dataclass(frozen=True)
class Predicted:
    """The compile inputs a key assumed (what `_cached_compilation` must then be
    called with for the keyed executable to be the right one), and the hash of the
    environment the key was computed under."""

    tuple_args: bool
    allow_in: tuple
    allow_out: tuple
    device_list: Any
    compiler_options_kvs: tuple
    ordered: tuple = ()
    env: str | None = None

    def matches(self, call: Any) -> bool:
        """Whether a `_compat.CompileCall` has exactly these inputs."""
        return (
            self.tuple_args == call.tuple_args
            and self.allow_in == tuple(call.allow_in)
            and self.allow_out == tuple(call.allow_out)
            and self.device_list == call.device_list
            and typed_options(self.compiler_options_kvs) == typed_options(call.compiler_options_kvs)
        )

    def with_call(self, call: Any) -> Predicted:
        """These, with the compile inputs of ``call`` instead."""
        return dataclasses.replace(
            self,
            tuple_args=call.tuple_args,
            allow_in=tuple(call.allow_in),
            allow_out=tuple(call.allow_out),
            device_list=call.device_list,
            compiler_options_kvs=call.compiler_options_kvs,
        )


def lowering_key(
    call: _compat.LoweringCall,
    *,
    jaxpr_digest: Any,
    keep_unused: bool,
    device_list: Any,
    compiler_options_kvs: tuple,
    pgle_profiler: Any,
) -> tuple[CacheKey, Predicted]:
    """The cache key of one `_cached_lowering_to_hlo` call, and the compile inputs
    it predicts. ``jaxpr_digest``: a callable returning the jaxpr's `JaxprDigest`
    (taken only once everything cheaper says the call is cacheable)."""
    lowering_parameters = call.lowering_parameters
    in_avals = call.in_avals
    _check_keyable(call, device_list, pgle_profiler)
    d = jaxpr_digest()
    jaxpr_hex, persistent = d.digest.hex(), d.persistent
    ordered = _compat.ordered_effects(call.closed_jaxpr.effects)
    tuple_args = _compat.should_tuple_args(len(in_avals), call.backend.platform)
    allow_in, allow_out = _compat.propagation_to_input_output(
        call.sem_in.shardings, call.sem_out.shardings, len(ordered)
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
        id(call.backend),
        call.num_const_args,
        tuple(in_avals),
        call.sem_in,
        call.sem_out,
        tuple(call.in_layouts),
        tuple(call.out_layouts),
        call.num_devices,
        tuple(call.donated_invars),
        call.inout_aliases,
        call.all_default_mem_kind,
        tuple(call.propagated_out_mem_kinds),
        tuple(call.platforms),
        lp,
        call.abstract_mesh,
        tuple_args,
        tuple(allow_in),
        tuple(allow_out),
        device_list,
        typed_options(compiler_options_kvs),
    )
    env, env_digest = environment(call.backend)
    parts = [
        ("jaxpr", jaxpr_hex),
        ("keep_unused", _vd(bool(keep_unused))),
        *_memoized_context_parts(inputs),
        *env,
    ]
    predicted = Predicted(
        tuple_args=tuple_args,
        allow_in=tuple(allow_in),
        allow_out=tuple(allow_out),
        device_list=device_list,
        compiler_options_kvs=compiler_options_kvs,
        ordered=tuple(ordered),
        env=env_digest,
    )
    key = CacheKey(parts=tuple(parts), persistent=persistent, local_why=d.why, relower=d.relower)
    return key, predicted


def _check_keyable(call: _compat.LoweringCall, device_list: Any, pgle_profiler: Any) -> None:
    """Raise `Uncacheable` for a lowering no key can stand for."""
    if pgle_profiler is not None:
        raise Uncacheable("pgle", "profile-guided recompilation changes the program per run")
    if call.lowering_parameters.override_lowering_rules:
        raise Uncacheable("override-lowering-rules", "custom lowering rules are process-local")
    if device_list is None:
        raise Uncacheable("no-device-assignment", "abstract-mesh lowering (export) is not cached")
    if any(
        getattr(a, "shape", None) is not None and not all(isinstance(d, int) for d in a.shape)
        for a in call.in_avals
    ):
        raise Uncacheable("dynamic-shapes", "symbolic dimensions")
    why = _compat.check_line_specific(call.closed_jaxpr, call.sem_in, call.sem_out)
    if why is not None:
        reason, _, detail = why.partition(": ")
        raise Uncacheable(reason, detail)


def _memoized_context_parts(inputs: _ContextInputs) -> list:
    """`_context_parts(inputs)`, memoized by value (not when an input is unhashable)."""
    try:
        context = _CONTEXT_MEMO.get(inputs)
    except TypeError:  # an unhashable input (e.g. a compiler option value)
        return _context_parts(inputs)
    if context is None:
        context = _context_parts(inputs)
        _CONTEXT_MEMO.put(inputs, context)
    return context


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
    compiler_options: tuple  # `typed_options`


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
        *compile_parts(
            i.tuple_args,
            i.allow_in,
            i.allow_out,
            i.device_list,
            tuple((k, v) for _, k, _, v in i.compiler_options),
        ),
    )


# _ContextInputs -> the key parts besides the jaxpr and the environment. Sound: the
# inputs are the values (compared by __eq__, as JAX's own lowering cache compares
# them: avals, shardings, layouts, device lists, options) the parts are computed
# from; id(backend) only over-keys (no part is computed from the backend).
_CONTEXT_MEMO = _memos.memo("key.context", _canon.BoundedMemo(1024))


def with_compile_parts(key: CacheKey, parts: list[tuple[str, str]]) -> CacheKey:
    names = {n for n, _ in parts}
    new = [(n, dict(parts)[n]) if n in names else (n, h) for n, h in key.parts]
    return dataclasses.replace(key, parts=tuple(new))


def with_module(key: CacheKey, module_digest: str) -> CacheKey:
    """A `CacheKey.relower` key completed by the module lowered for it (the
    executable is a function of the module and the compile inputs the key holds)."""
    return dataclasses.replace(key, parts=(*key.parts, ("module", module_digest)), relower=False)
