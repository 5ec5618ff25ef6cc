"""Which params of a primitive reach the compiled program, and how each is keyed.

The per-primitive policy of the canonical form (`pcache._canon`): params that only
name things or matter only before lowering are left out (each entry justified by
the primitive's lowering rule), host-callback functions are keyed as slots, and
the primitives whose params hold process-local callables are marked.
"""

from __future__ import annotations

import dataclasses
import sys
from typing import Any

from pcache._canon_values import Ctx, Unknown, enc
from pcache._errors import Uncacheable

# Params that do not reach the compiled program. Each entry is justified by the
# primitive's lowering rule in jax 0.10.2.
_SKIP_PARAMS: dict[str, frozenset[str]] = {
    # pjit lowering uses `name` only for the MLIR function's symbol name.
    "jit": frozenset({"name"}),
    "pjit": frozenset({"name"}),
    # core_call/closed_call lower `call_jaxpr`; `name` names the function only.
    "closed_call": frozenset({"name"}),
    "core_call": frozenset({"name"}),
    # _custom_jvp_vjp_call_lowering lowers `call_jaxpr` and ignores the rest: the JVP
    # rule only matters under differentiation, which has already happened (its output
    # is explicit in the jaxpr).
    "custom_jvp_call": frozenset({"jvp_jaxpr_fun", "jvp_jaxpr_thunk"}),
    # Same lowering rule; fwd/bwd only matter for AD, after which the jaxpr contains
    # the backward pass explicitly. out_trees is a thunk over pytree structure.
    "custom_vjp_call": frozenset({"fwd_jaxpr_thunk", "bwd", "out_trees"}),
    "custom_vjp_call_jaxpr": frozenset({"fwd_jaxpr_thunk", "bwd", "out_trees"}),
    # custom_lin only exists mid-linearization and has no lowering rule; if it ever
    # reaches lowering, lowering fails. Its bwd is a Python function.
    "custom_lin": frozenset({"bwd"}),
    # _reduce_lower lowers `jaxpr` (the traced computation, keyed as a sub-jaxpr);
    # `computation` is the Python function it was traced from, used only by the
    # batching and JVP rules, which have run by the time a jaxpr is lowered.
    "reduce": frozenset({"computation"}),
    # Lowered by `mlir.lower_fun(custom_vmap_impl)`, which runs `call` and drops the
    # rest: the vmap rule only matters under vmap, which has run before lowering.
    "custom_vmap_call": frozenset({"rule", "in_tree", "out_tree"}),
}

# Host-callback primitives: their ``callback`` param is a Python function that the
# lowering only wraps and registers as a host callback (the module holds its index,
# never its code; see `emit_python_callback`), so it is keyed as a slot, and the
# program as `JaxprDigest.relower`: a hit lowers it again, its key is completed by
# the lowered module, and the stored executable is bound to the callbacks that
# lowering registered (this call's own functions; `pcache._jit_seam`). The key
# never decides which Python function runs.
_HOST_CALLBACK_PRIMS = frozenset({"pure_callback", "io_callback", "debug_callback"})
# Primitives whose lowering makes a host callback from their (data) params: relower
# (checkify's ``check`` raises its error from one: review 99).
CALLBACK_LOWERING_PRIMS = frozenset({"debug_print", "check", *_HOST_CALLBACK_PRIMS})
# Primitives whose result depends on state XLA keeps inside each executable:
# ``rng_uniform`` draws from a generator seeded when the executable is compiled (from
# a per-process sequence) and advanced by each run, so one executable served to two
# call sites, or loaded from another process, draws another stream than stock JAX
# (review 27). Never cached, and a trace holding one is never reused.
STATEFUL_PRIMS = frozenset({"rng_uniform"})

# Primitives whose params hold other Python functions: called at lowering or XLA
# compile time (inspect_sharding, custom_partitioning), or formatting options of
# debug_print (np_printoptions' formatter). Keyed by object identity: memory tier only.
_LOCAL_CALLABLE_PRIMS = frozenset(
    {
        "pure_callback",
        "io_callback",
        "debug_callback",
        "debug_print",
        "inspect_sharding",
        "custom_partitioning",
    }
)


def _enc_policy(policy: Any, ctx: Ctx) -> str:
    """remat2's `policy`.

    _remat_lowering (ad_checkpoint.py) never reads `policy`: the policy decides what
    partial evaluation saves, and after differentiation that choice is explicit in the
    jaxpr. So it cannot change the compiled program. It is still included when it has
    a canonical form (dataclass policies, module-level functions), and an arbitrary
    closure becomes a fixed tag rather than making the program uncacheable.
    """
    if policy is None:
        return "N"
    if dataclasses.is_dataclass(policy):
        try:
            return enc(policy, ctx)
        except Unknown:
            return "opaque-policy"
    qn = getattr(policy, "__qualname__", None)
    mod = getattr(policy, "__module__", None)
    if (
        isinstance(qn, str)
        and isinstance(mod, str)
        and "<" not in qn
        and getattr(sys.modules.get(mod), qn, None) is policy
    ):
        return f"fn:{mod}.{qn}"
    return "opaque-policy"


def enc_params(prim: str, params: dict, ctx: Ctx) -> str:
    skip = _SKIP_PARAMS.get(prim, ())
    allow_local = prim in _LOCAL_CALLABLE_PRIMS
    out = []
    prev_allow, prev_in_params = ctx.allow_local, ctx.in_params
    ctx.allow_local, ctx.in_params = allow_local, not allow_local
    first_reason = not ctx.local_why
    try:
        for k in sorted(params):
            if k in skip:
                continue
            v = params[k]
            if k == "callback" and prim in _HOST_CALLBACK_PRIMS:
                out.append("callback=hostcb")
                continue
            try:
                if prim == "remat2" and k == "policy":
                    s = _enc_policy(v, ctx)
                else:
                    s = enc(v, ctx)
            except Unknown as e:
                # Bypassed: the HLO seam keys the program by its module instead.
                raise Uncacheable(
                    f"unknown-param:{prim}.{k}:{e.qualname}",
                    "pcache has no canonical form for this parameter",
                ) from None
            out.append(f"{k}={s}")
    finally:
        ctx.allow_local = prev_allow
        ctx.in_params = prev_in_params
    if first_reason and ctx.local_why == "host-callback":
        ctx.local_why = f"host-callback:{prim}"
    return ";".join(out)
