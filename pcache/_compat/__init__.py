"""Every JAX private internal pcache uses, behind one version gate.

This is the only module of pcache that imports ``jax._src`` or jaxlib internals,
and the only one that knows how the JAX lines differ: the next JAX release should
be a change here (and `SUPPORTED`). Other modules call the functions and use the
types below; they never reach into JAX's private modules themselves.

On a JAX outside `SUPPORTED` nothing below the gate is imported: `JIT_SEAM` is
False, the jit seam is not installed, and only the HLO-level seam runs (JAX's own
persistent-cache interface: `compile_or_get_cached`, `get_cache_key`), if even
those names exist (`HLO_SEAM`). No name here raises on import on any JAX.

The 0.9 line differs from 0.10 in: `_cached_lowering_to_hlo` also returns ``nreps``
(jit-of-pmap) and `_cached_compilation` takes mesh / spmd / auto-spmd / pmap_nreps inputs (see
`lowering_result`, `compile_call`); the auto-layout and PRNG names; literal arrays; the
trace-context names; `PartitionSpec` internals; and abstract devices without a platform.
"""

from __future__ import annotations

import collections
import dataclasses
import enum
import hashlib
import logging
import sys
from operator import is_ as _is
from typing import Any

import jax
import jaxlib
import numpy as np

from pcache._introspect import class_attr
from pcache._introspect import typed as _typed

__all__ = [  # the types the canonical form names (re-exported from JAX's private modules)
    "AbstractMesh", "AbstractRef", "AbstractToken", "ArrayImpl", "AutoLayoutSingleton",
    "AxisEnv", "ClosedJaxpr", "Device", "DropVar", "Effect", "FlatCallback", "Format",
    "GSPMDSharding", "Jaxpr", "JaxprEqnContext", "KeyTy", "Layout", "Literal",
    "ManualAxisType", "Mesh", "MeshComputation", "PRNGImpl", "PRNGKeyArray",
    "PjitFunction", "Primitive", "PyTreeDef", "ShapedArray", "SingleDeviceSharding",
    "Tolerance", "Tracer", "TypedNdArray", "UnspecifiedValue", "Var", "DeviceList",
    "registered_prng_impls"
]  # fmt: skip

# The JAX lines the jit seam was written against (the private names below exist
# with these signatures there). 0.9.x is served from 0.9.2, the first 0.9 release
# the seam was verified on (scripts/compat.sh).
SUPPORTED = ((0, 9, 2), (0, 11, 0))
JAX_VERSION = jax.__version__
JAXLIB_VERSION = jaxlib.__version__


def jax_version() -> tuple[int, ...]:
    return tuple(int(p) for p in JAX_VERSION.split(".")[:3] if p.isdigit())


def jit_seam_supported() -> bool:
    lo, hi = SUPPORTED
    return lo <= jax_version() < hi


#: The jit seam (and the canonical form) can run on this JAX.
JIT_SEAM = jit_seam_supported()
#: The 0.9.x line (only meaningful when JIT_SEAM).
LINE_09 = jax_version() < (0, 10, 0)


class Absent:
    """Stands for a JAX type this line does not have: no object is an instance."""


# ------------------------------------------------------------------ the one gate

if JIT_SEAM:
    from jax._src import cache_key as _cache_key
    from jax._src import compilation_cache as _cc
    from jax._src import compiler as _compiler
    from jax._src import config as _config
    from jax._src import core as _core
    from jax._src import dispatch as _dispatch
    from jax._src import effects as _effects
    from jax._src import pjit as _pjit
    from jax._src import source_info_util as _source_info_util
    from jax._src import traceback_util as _traceback_util
    from jax._src import util as _util
    from jax._src.callback import _FlatCallback as FlatCallback
    from jax._src.custom_derivatives import custom_jvp as _custom_jvp
    from jax._src.custom_derivatives import custom_vjp as _custom_vjp
    from jax._src.effects import Effect
    from jax._src.interpreters import mlir as _mlir
    from jax._src.interpreters import pxla as _pxla
    from jax._src.lax.lax import Tolerance
    from jax._src.layout import Format, Layout
    from jax._src.lib import gpu_solver as _gpu_solver
    from jax._src.lib import lapack as _lapack
    from jax._src.lib.mlir import ir as _ir
    from jax._src.mesh import AbstractMesh, Mesh
    from jax._src.named_sharding import UnspecifiedValue
    from jax._src.sharding_impls import GSPMDSharding, SingleDeviceSharding
    from jax._src.state.types import AbstractRef
    from jaxlib._jax import ArrayImpl, Device, DeviceList, PjitFunction, PyTreeDef

    if LINE_09:
        # 0.9: the auto-layout type is `AutoLayout` (Layout.AUTO is an instance of
        # it); the PRNG module is jax._src.prng; literals hold plain numpy arrays.
        from jax._src.layout import AutoLayout as AutoLayoutSingleton
        from jax._src.prng import KeyTy, PRNGImpl, PRNGKeyArray
        from jax._src.prng import prngs as registered_prng_impls

        TypedNdArray: Any = Absent
    else:
        from jax._src.layout import AutoLayoutSingleton
        from jax._src.literals import TypedNdArray
        from jax._src.random.prng import KeyTy, PRNGImpl, PRNGKeyArray
        from jax._src.random.prng import prngs as registered_prng_impls

    DropVar = _core.DropVar
    #: vmap's axis name when none is given (a sentinel object).
    no_axis_name = _core.no_axis_name
    # The classes jax.extend.core re-exports; importing jax.extend costs ~20 ms (it
    # imports Pallas), which a warm process would pay on its first jit call.
    Jaxpr = _core.Jaxpr
    ClosedJaxpr = _core.ClosedJaxpr
    Literal = _core.Literal
    Var = _core.Var
    JaxprEqnContext = _core.JaxprEqnContext
    ShapedArray = _core.ShapedArray
    AbstractToken = _core.AbstractToken
    Primitive = _core.Primitive
    ManualAxisType = getattr(_core, "ManualAxisType", Absent)  # added in 0.10
    AxisEnv = _core.AxisEnv
    Tracer = _core.Tracer
    #: JAX's callable wrappers whose instance attributes (the wrapped functions and
    #: their options) are all they are: compared by value, attribute by attribute.
    CUSTOM_DERIVATIVE_TYPES: tuple = (_custom_jvp, _custom_vjp)
    MeshComputation = _pxla.MeshComputation
    #: A registered lowering rule and its inline flag (a frozen, slotted dataclass).
    LoweringRuleEntry = getattr(_mlir, "LoweringRuleEntry", Absent)
    HLO_SEAM = True
else:  # pragma: no cover - exercised by scripts/compat.sh on other JAX lines
    _pxla = _mlir = _pjit = _dispatch = _effects = _core = _cache_key = None
    ArrayImpl = PjitFunction = Tracer = Primitive = AbstractToken = DeviceList = Absent
    LoweringRuleEntry = Absent
    CUSTOM_DERIVATIVE_TYPES = ()
    try:
        from jax._src import compilation_cache as _cc
        from jax._src import compiler as _compiler
        from jax._src import config as _config

        HLO_SEAM = True
    except ImportError:
        _cc = _compiler = _config = None
        HLO_SEAM = False

pxla_logger = logging.getLogger("jax._src.interpreters.pxla")
dispatch_logger = logging.getLogger("jax._src.dispatch")


# ------------------------------------------------------------- patch points

#: The JAX functions pcache wraps: name -> (owner, attribute). `patch` replaces one
#: and returns the original.
PATCH_POINTS = {
    "jit_evict": ("pjit", "jit_evict_fn"),
    "infer_params": ("pjit", "_infer_params_cached"),
    "pjit_lower": ("pjit", "_pjit_lower"),
    "lsc": ("pxla", "lower_sharding_computation"),
    "devices": ("pxla", "_get_and_check_device_assignment"),
    "lower": ("pxla", "_cached_lowering_to_hlo"),
    "compile": ("pxla", "_cached_compilation"),
    "stablehlo": ("MeshComputation", "stablehlo"),
    "compile_or_get_cached": ("compiler", "compile_or_get_cached"),
    "trace_to_jaxpr": ("pe", "trace_to_jaxpr"),  # (persisted traces: `pcache._persist`)
    "run_python": ("pjit", "_run_python_pjit"),  # (a served trace: `pcache._served`)
}


def _owner(point: str) -> tuple[Any, str]:
    name, attr = PATCH_POINTS[point]
    mc = getattr(_pxla, "MeshComputation", None)
    owners = {"pjit": _pjit, "pxla": _pxla, "compiler": _compiler, "MeshComputation": mc}
    return {**owners, "pe": getattr(_pjit, "pe", None)}[name], attr


def patch(point: str, replacement: Any) -> Any:
    """Install ``replacement`` at ``point`` (see `PATCH_POINTS`); return the original."""
    owner, attr = _owner(point)
    original = getattr(owner, attr)
    setattr(owner, attr, replacement)
    return original


def current(point: str) -> Any:
    return getattr(*_owner(point))


def register_clear_hook(hook: Any, name: str) -> None:  # jax.clear_caches() clears it
    _util.register_cache(hook, name)


def exclude_from_tracebacks(directory: str) -> None:
    """Keep pcache's frames out of filtered tracebacks and the HLO's locations."""
    _traceback_util.register_exclusion(directory)
    _source_info_util.register_exclusion(directory)


# ------------------------------------------------ the lowering and compile calls


def _call_type(name: str, fields: str, doc: str, of: Any = None, defaults=()) -> Any:
    """A named tuple of a wrapped JAX call's arguments, made by ``of(args, kwargs)``."""
    t = collections.namedtuple(name, fields, defaults=defaults)
    t.__doc__ = doc
    t.of = classmethod(of or (lambda cls, args, kwargs: cls(*args, **kwargs)))
    return t


LoweringCall = _call_type(
    "LoweringCall",
    "closed_jaxpr module_name backend num_const_args in_avals sem_in sem_out in_layouts "
    "out_layouts num_devices device_assignment donated_invars all_default_mem_kind "
    "inout_aliases propagated_out_mem_kinds platforms lowering_parameters abstract_mesh",
    "The arguments of one `pxla._cached_lowering_to_hlo` call, by name.",
    of=lambda cls, args, kw: cls(*args, kw["lowering_parameters"], kw.get("abstract_mesh")),
)
PjitLowerCall = _call_type(
    "PjitLowerCall",
    "jaxpr in_shardings out_shardings in_layouts out_layouts donated_invars ctx_mesh name "
    "keep_unused inline compiler_options_kvs lowering_platforms lowering_parameters pgle_profiler",
    "The arguments of one `pjit._pjit_lower` call (the same on every line).",
)
LscCall = _call_type(
    "LscCall",
    "closed_jaxpr api_name fun_name options",
    "A `pxla.lower_sharding_computation` call: 3 arguments and its keyword options.",
    of=lambda cls, args, kwargs: cls(*args[:3], kwargs),
)
CompileOrGetCachedCall = _call_type(
    "CompileOrGetCachedCall",
    "backend computation devices compile_options host_callbacks executable_devices pgle_profiler",
    "The arguments of one `compiler.compile_or_get_cached` call.",
    defaults=(None,),
)


def lowering_result(module, keepalive, host_callbacks, unordered, ordered, tuple_args, poly):
    """`_cached_lowering_to_hlo`'s return value on this JAX line."""
    if LINE_09:  # 0.9 also returns nreps (always 1 here: see check_line_specific)
        return (module, keepalive, host_callbacks, unordered, ordered, 1, tuple_args, poly)
    return (module, keepalive, host_callbacks, unordered, ordered, tuple_args, poly)


def check_line_specific(closed_jaxpr, sem_in, sem_out) -> str | None:
    """Why this line cannot key the program (its lowering or compile inputs are not
    the plain SPMD ones a key predicts), or None."""
    if not LINE_09:
        return None
    jaxpr = closed_jaxpr.jaxpr
    if _pxla._jaxpr_replicas(jaxpr) != 1 or _dispatch.jaxpr_has_primitive(jaxpr, "xla_pmap"):
        return "jit-of-pmap: 0.9: jit of pmap lowers to a replicated program"
    if any(isinstance(s, _pxla.AUTO) for s in (*sem_in.shardings, *sem_out.shardings)):
        return "auto-sharding: 0.9: AUTO shardings use auto-SPMD partitioning"
    return None


@dataclasses.dataclass(frozen=True)
class CompileCall:
    """The arguments of one `pxla._cached_compilation` call, by name, the same on
    every line. ``plain``: the plain SPMD compile a key predicts (0.9 also compiles
    jit-of-pmap and auto-SPMD programs here, which pcache leaves alone)."""

    name: str
    tuple_args: bool
    allow_in: tuple
    allow_out: tuple
    host_callbacks: Any
    backend: Any
    device_list: Any
    compiler_options_kvs: tuple
    pgle_profiler: Any
    plain: bool = True

    @classmethod
    def of(cls, rest: tuple) -> CompileCall:
        if LINE_09:
            (name, mesh, spmd_lowering, tuple_args, auto_spmd_lowering, allow_in, allow_out,
             host_callbacks, backend, da, pmap_nreps, kvs, pgle) = rest  # fmt: skip
            plain = pmap_nreps == 1 and not auto_spmd_lowering and spmd_lowering and mesh is None
            return cls(name, tuple_args, tuple(allow_in), tuple(allow_out), host_callbacks,
                       backend, da, kvs, pgle, bool(plain))  # fmt: skip
        (name, tuple_args, allow_in, allow_out, host_callbacks, backend, da, kvs, pgle) = rest
        return cls(name, tuple_args, tuple(allow_in), tuple(allow_out), host_callbacks,
                   backend, da, kvs, pgle)  # fmt: skip


# --------------------------------------------------------- what the seams ask JAX


def ordered_effects(effects) -> list:
    return list(_effects.ordered_effects.filter_in(effects))


def unordered_effects(effects) -> list:  # (the complement of `ordered_effects`)
    return list(_effects.ordered_effects.filter_not_in(effects))


def should_tuple_args(num_args: int, platform: str) -> bool:
    return _dispatch.should_tuple_args(num_args, platform)


def propagation_to_input_output(in_shardings, out_shardings, num_ordered: int):
    return _pxla.get_prop_to_input_output(in_shardings, out_shardings, num_ordered)


def shape_poly_state(platforms) -> Any:
    return _mlir.ShapePolyLoweringState((), tuple(platforms))


def create_device_list(devices) -> Any:
    return _pxla._create_device_list(devices)


def compile_options(
    backend, device_list, compiler_options_kvs, tuple_args, allow_in, allow_out
) -> Any:
    """The CompileOptions JAX builds for a plain SPMD jit compile of these inputs."""
    dev = np.array(list(device_list), dtype=object).reshape((1, len(device_list)))
    options = _compiler.get_compile_options(
        num_replicas=1,
        num_partitions=len(device_list),
        device_assignment=dev,
        env_options_overrides=dict(compiler_options_kvs),
        backend=backend,
    )
    options.parameter_is_tupled_arguments = tuple_args
    build = options.executable_build_options
    build.allow_spmd_sharding_propagation_to_parameters = list(allow_in)
    build.allow_spmd_sharding_propagation_to_output = list(allow_out)
    return options


def trace_context() -> Any:
    """What JAX keys its own trace caches on (hashable), each value by an exact
    encoding (`_context_value`); else a value equal to nothing, not even itself in a
    later call (a user context's object: review 37)."""
    values = _config.trace_context()
    prev, enc = _CONTEXT  # (the same values by identity: the same encoding)
    if len(values) == len(prev) and all(map(_is, values, prev)):
        return enc
    enc = ("t", *map(_context_value, values))
    if not any(type(e) is _Unequal for e in enc):
        _CONTEXT[:] = [values, enc]
    return enc


def _context_value(v: Any) -> Any:
    """Exact scalars and tuples by `typed`; XLA metadata by its items, so encoded
    (its ``==`` says ``1 == True == 1.0``: review 85); an enum member, an axis
    environment (compared by identity), a mesh or a device by their own ``==``;
    anything else (a user context's object) equal to nothing."""
    try:
        return _typed(v, strict=True)
    except TypeError:
        pass
    from jax._src.xla_metadata_lib import XlaMetadata

    if type(v) is XlaMetadata:
        try:
            return ("xla_metadata", _typed(tuple(sorted(dict.items(v.val))), strict=True))
        except TypeError:
            return _Unequal()
    if type(v) in (AxisEnv, Mesh, AbstractMesh, Device) or (
        isinstance(v, enum.Enum) and class_attr(type(v), "__eq__") in _PLAIN_EQ
    ):
        return (type(v), v)
    return _Unequal()


_CONTEXT: list = [(), ()]
_PLAIN_EQ = (object.__eq__, int.__eq__, str.__eq__)  # (an enum's: identity, its value's)


class _Unequal:
    """Equal to nothing (a fresh one per call: a tuple compares an object with itself
    by identity first)."""

    __slots__ = ()
    __eq__ = lambda self, other: False  # noqa: E731
    __hash__ = lambda self: 0  # noqa: E731


def log_compiles() -> bool:
    return bool(_config.log_compiles.value)


def jax_cache_configured() -> bool:
    """Whether the user pointed JAX's own persistent cache at a directory (its
    `jax_enable_compilation_cache` alone, True by default, means nothing)."""
    return bool(_config.enable_compilation_cache.value) and (
        _config.compilation_cache_dir.value is not None or _cc._cache is not None
    )


def hlo_cache_key(computation, devices, compile_options, backend) -> str:
    """JAX's own persistent-cache key of a lowered module."""
    return _cc.get_cache_key(computation, devices, compile_options, backend)


# ------------------------------------------------------ serializing executables
#
# XLA cannot serialize every executable it compiles: on jaxlib 0.10.x an SPMD
# executable whose parameter layouts cannot be read (token parameters) crashes the
# process in `PjRtLoadedExecutable::Serialize` (the account: `pcache._jit_seam`,
# whose `unserializable_program` names such programs before compiling). `serialize`
# checks the compiled executable itself and refuses instead of crashing: fail closed.

#: The reasons (``nonpersistent_reasons`` keys) for programs never serialized.
UNSERIALIZABLE_ORDERED = "unserializable:ordered-effects-multi-device"
UNSERIALIZABLE_TOKENS = "unserializable:token-parameters"


def serialize_hazard(exe) -> str | None:
    """Why serializing ``exe`` would take the process down (its parameter layouts
    cannot be read while it has parameter shardings; not telling is a hazard), or None."""
    layouts = getattr(exe, "get_parameter_layouts", None)
    shardings = getattr(exe, "get_parameter_shardings", None)
    if layouts is None or shardings is None:  # not a PjRt-IFRT executable: nothing known
        return None
    try:
        layouts()
        return None
    except Exception:  # UNIMPLEMENTED: a token or opaque parameter
        pass
    try:
        return UNSERIALIZABLE_TOKENS if shardings() else None
    except Exception:
        return UNSERIALIZABLE_TOKENS


def serialize(exe, backend) -> bytes:
    """An executable's bytes; `Uncacheable` (a reason above) for one XLA cannot
    serialize without crashing the process."""
    why = serialize_hazard(exe)
    if why is not None:
        from pcache._errors import Uncacheable

        raise Uncacheable(why, "XLA cannot serialize this executable (token parameters)")
    return exe.serialize() if hasattr(exe, "serialize") else backend.serialize_executable(exe)


def module_name(computation) -> str:
    return str(computation.operation.attributes["sym_name"]).strip('"')


def kernel_initializers() -> tuple[tuple[str, Any], ...]:
    """(custom-call target prefix, initializer) of the kernel libraries whose lowering
    rules initialize them lazily (`lapack.prepare_lapack_call`'s on 0.9 and 0.10)."""
    table: list[tuple[str, Any]] = [("lapack_", _lapack._lapack.initialize)]
    hybrid = getattr(_gpu_solver, "initialize_hybrid_kernels", None)
    if hybrid is not None:
        table += [("cu_hybrid_", hybrid), ("hip_hybrid_", hybrid)]
    return tuple(table)


def module_digest(module) -> str:
    """sha256 of a lowered module's text: no locations, every constant in full."""
    text = module.operation.get_asm(binary=True, enable_debug_info=False)
    return hashlib.sha256(text).hexdigest()


def custom_call_targets(module) -> tuple[str, ...]:
    """The custom-call targets a lowered module calls (sorted, unique)."""
    found: set[str] = set()

    def visit(op):
        if op.name == "stablehlo.custom_call":
            found.add(_ir.StringAttr(op.attributes["call_target_name"]).value)
        return _ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return tuple(sorted(found))


# Ops whose results depend on state XLA keeps in the executable (``stablehlo.rng``:
# a generator seeded at compile time, advanced by every run).
STATEFUL_OPS = frozenset({"stablehlo.rng", "mhlo.rng"})


def stateful_op(module) -> str | None:
    """The first op of a lowered module whose executable holds state, else None."""
    found: list[str] = []

    def visit(op):
        if op.name in STATEFUL_OPS:
            found.append(op.name)
            return _ir.WalkResult.INTERRUPT
        return _ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return found[0] if found else None


@dataclasses.dataclass(frozen=True)
class InflightLowering:
    """A `lower_sharding_computation` call found running on the stack."""

    args: tuple
    kwargs: dict
    backend: Any
    device_assignment: Any


def inflight_lowering(lower_sharding_computation, closed_jaxpr) -> InflightLowering | None:
    """The running call of JAX's own ``lower_sharding_computation`` (the original,
    profiler-wrapped function) that is lowering ``closed_jaxpr``: what it was
    called with, and the backend and devices it chose. None unless found exactly.

    For a `_cached_lowering_to_hlo` call that did not pass through pcache's wrapper
    of it: JAX started its backends, and with them pcache's plugin, inside that
    lowering (a zero-code process whose first JAX call is a jit). Read from the
    frames: the wrapper's ``args``/``kwargs`` are the call's arguments as given
    (``closed_jaxpr`` is rebound after DCE inside the function), and the inner
    frame, which must be lowering this very jaxpr, holds the device assignment.
    """
    inner = getattr(lower_sharding_computation, "__wrapped__", None)
    outer_code = getattr(lower_sharding_computation, "__code__", None)
    if inner is None or outer_code is None or not hasattr(inner, "__code__"):
        return None
    frame = sys._getframe(1)
    for _ in range(8):  # the caller, through pcache's own proxy frames
        if frame is None or frame.f_code is inner.__code__:
            break
        frame = frame.f_back
    if frame is None or frame.f_code is not inner.__code__:
        return None
    here, outer = frame.f_locals, frame.f_back
    if (
        outer is None
        or outer.f_code is not outer_code
        or here.get("closed_jaxpr") is not closed_jaxpr
    ):
        return None
    try:
        args, kwargs = outer.f_locals["args"], outer.f_locals["kwargs"]
        backend, devices = here["backend"], here["device_assignment"]
    except KeyError:
        return None
    if not isinstance(args, tuple) or not isinstance(kwargs, dict) or len(args) < 3:
        return None
    return InflightLowering(args, dict(kwargs), backend, devices)


def lower_for_fingerprint(fun, args, kwargs, lower_sharding_computation) -> None:
    """Trace ``fun`` as `jax.jit` would; run the seam's ``lower_sharding_computation``
    (which raises with the key before lowering) on its jaxpr."""
    jitted = fun if hasattr(fun, "trace") and hasattr(fun, "lower") else jax.jit(fun)
    traced = jitted.trace(*args, **kwargs)
    p = traced._params
    meta = traced._meta_tys_flat
    jaxpr = p["jaxpr"]
    in_shardings = _pjit._resolve_in_shardings(meta, p["in_shardings"])
    in_layouts = _pjit._resolve_in_layouts(meta, p["in_layouts"], in_shardings, jaxpr.in_avals)
    out_layouts = _pjit._resolve_out_layouts(p["out_layouts"], p["out_shardings"], jaxpr.out_avals)
    lower_sharding_computation(
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


# ------------------------------------------------------ what the canonical form asks

# XLA_FLAGS that JAX's own persistent cache leaves out of its key (dump/debug flags).
if JIT_SEAM:
    xla_flags_to_exclude_from_cache_key = _cache_key.xla_flags_to_exclude_from_cache_key
    xla_flag_prefixes = _cache_key.get_flag_prefixes
else:  # pragma: no cover
    xla_flags_to_exclude_from_cache_key: Any = ()

    def xla_flag_prefixes() -> tuple:
        return ()


def trace_context_items() -> list[tuple[str, object]]:
    """(name, value) of every config/context value JAX keys its trace caches on but
    pcache's recording token (`traces.RECORDING`, no program's part: an eager op run
    while a trace was recorded was keyed apart, compiled again by a later process)."""
    values = _config.trace_context()  # (0.9 cannot name them: by position, all keyed)
    names = [f"trace_context[{i}]" for i in range(len(values))] if LINE_09 else _config.trace_context_names()  # fmt: skip
    return [(n, v) for n, v in zip(names, values, strict=True) if n != "jax_pcache_recording"]


def config_value(name: str):
    """A JAX option's or flag's value by name, from its holder (which a flag such as
    ``jax_disable_most_optimizations``, with no `config.<name>`, has too)."""
    return _config.config._value_holders[name].value


def lowering_platform_names() -> tuple[str, ...]:  # "*" (the default), then by platform
    return ("*", *_mlir._platform_specific_lowerings)


def lowering_registries() -> tuple[dict, ...]:  # in `lowering_platform_names` order
    return (_mlir._lowerings, *_mlir._platform_specific_lowerings.values())


def lowering_handlers() -> tuple[dict, ...]:  # type -> its MLIR type, constant, attribute
    return (_mlir.ir_type_handlers, _mlir._constant_handlers, _mlir._attribute_handlers)


_LOWER_FUN_CODE = _mlir.lower_fun(lambda: None).__code__ if JIT_SEAM else None


def lower_fun_parts(rule) -> tuple[Any, bool] | None:
    """``(fun, multiple_results)`` of a rule made by `mlir.lower_fun` (it lowers what
    tracing ``fun`` gives at lowering time), else None."""
    if getattr(rule, "__code__", None) is not _LOWER_FUN_CODE or rule.__closure__ is None:
        return None
    cells = dict(zip(rule.__code__.co_freevars, rule.__closure__, strict=True))
    try:
        fun, multiple = cells["fun"].cell_contents, cells["multiple_results"].cell_contents
    except (KeyError, ValueError):
        return None
    return (fun, multiple) if callable(fun) and type(multiple) is bool else None


def lowering_entries(prim) -> tuple:  # registered for it now (default, per platform)
    return tuple(d.get(prim) for d in lowering_registries())


def partition_spec_entries(p) -> tuple:
    """A PartitionSpec's entries (0.10 forbids iterating one with unreduced axes)."""
    return tuple(p._partitions if LINE_09 else p.partitions)


def named_sharding_logical_device_ids(s):  # a device-id permutation, or None
    return getattr(s, "_logical_device_ids", None)


def abstract_device_platform(ad):  # an AbstractMesh device's (0.9's have none)
    return None if LINE_09 else ad.platform


def gspmd_sharding_devices(s) -> tuple:  # its device assignment, in order
    return tuple(s._device_assignment)


def gspmd_sharding_proto(s) -> bytes:  # its serialized OpSharding proto
    return s._hlo_sharding.to_proto().SerializeToString()


# ------------------------------------------------------------------ trace reuse
InferParamsCall = _call_type(
    "InferParamsCall",
    "fun jit_info signature in_avals ctx_mesh",
    "`pjit._infer_params_cached`: where a call that missed the C++ fast path finds its "
    "trace (a `weakref_lru_cache`, `fun` and `jit_info` by identity, plus the trace "
    "context), an `InferParamsCacheEntry` `_infer_params` fills after tracing.",
)

# (the rest in a module of its own: this one is at the size limit)
if JIT_SEAM:
    from pcache._compat import traces as _traces

    recording, recording_trace = _traces.recording, _traces.recording_trace
    config_items, default_backend = _traces.config_items, _traces.default_backend
    trace_state_clean, traced = _traces.trace_state_clean, _traces.traced
    out_tree_data, out_tree_of = _traces.out_tree_data, _traces.out_tree_of
    config_snapshot, CONFIG_DECORATOR = _traces.config_snapshot, _traces.CONFIG_DECORATOR
    jit_info_key, jit_parts = _traces.jit_info_key, _traces.jit_parts
    primitive_rules, pytree_registry = _traces.primitive_rules, _traces.pytree_registry
    rule_registries, type_handlers = _traces.rule_registries, _traces.type_handlers
    rule_tables, OPAQUE_TYPES, NB_FUNC = _traces.rule_tables, _traces.OPAQUE_TYPES, _traces.NB_FUNC
    served_entry, trace_reuse_blocked = _traces.served_entry, _traces.trace_reuse_blocked
    unreusable_params, recording_token = _traces.unreusable_params, _traces.recording_token
else:  # pragma: no cover - trace reuse runs behind the jit seam only

    def _no_jit_seam(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("trace reuse needs the jit seam (a supported JAX line)")

    recording = recording_trace = recording_token = config_items = _no_jit_seam
    default_backend = trace_state_clean = traced = out_tree_data = _no_jit_seam
    out_tree_of = config_snapshot = jit_info_key = jit_parts = rule_tables = _no_jit_seam
    primitive_rules = pytree_registry = rule_registries = type_handlers = _no_jit_seam
    served_entry = trace_reuse_blocked = unreusable_params = _no_jit_seam
    CONFIG_DECORATOR, OPAQUE_TYPES, NB_FUNC = None, (), None
