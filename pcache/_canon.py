"""Canonical form and digest of jaxprs, and of the values that go into a cache key.

One walker turns a (Closed)Jaxpr into a list of canonical lines; the digest is the
sha256 of those lines, the text form (``canonical_text``) is the same lines joined,
with sub-jaxprs expanded in place where the digest form writes their digest.

Canonical form:

* variables are numbered by first appearance (constvars, invars, then equation
  outvars in order); a DropVar is ``_`` and never shares a number;
* equations in order: outvars with avals, primitive name, params sorted by name,
  invars, the equation context (``eqn.ctx``) and effects;
* literals by dtype and exact bytes (so ``-0.0 != 0.0`` and NaN payloads count);
* closed-over constants (``ClosedJaxpr.consts``) by content: lowering embeds them;
* sub-jaxprs in params (any Jaxpr/ClosedJaxpr, alone or in a tuple) by their own
  digest, found generically, so new higher-order primitives are covered;
* nothing from ``source_info``/``debug_info``, and no param that only names things.

Values are encoded by ``canonicalize``: an injective, type-tagged text encoding
that never goes through ``repr``/``str`` of an arbitrary object (those may contain
memory addresses). An unknown type raises ``Uncacheable``.

This module is the walk and the public entry points; the value encodings are in
`pcache._canon_values`, the per-primitive param policy in `pcache._canon_params`,
lowering rules' keys in `pcache._canon_rules`, the memos in `pcache._canon_memo`.

Python callables bound into the executable (pure_callback, io_callback, debug
callbacks, custom_partitioning) cannot be persisted: they are keyed by object
identity, and the result is marked ``persistent=False`` (memory tier only).
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import types
from typing import Any, NamedTuple

from pcache import _canon_rules, _canon_values, _compat, _memos
from pcache._canon_memo import BoundedMemo, IdMemo, fresh, memos_on
from pcache._canon_params import CALLBACK_LOWERING_PRIMS, STATEFUL_PRIMS, enc_params
from pcache._canon_rules import RULE_KEYS, RuleKey, baseline_rule, lowering_rule_key
from pcache._canon_values import (
    ARRAY_MEMO,
    AVAL_MEMO,
    CTX_MEMO,
    EXACT,
    Ctx,
    Unknown,
    enc,
    enc_aval,
    enc_eqn_ctx,
    enc_slots,
    enc_str,
    jax_primitive_name,
    qual,
    same_content,
)
from pcache._errors import Uncacheable
from pcache._introspect import cell_bound
from pcache._rule_state import holds_state

__all__ = [
    "BoundedMemo",
    "JaxprDigest",
    "RuleKey",
    "canonical_text",
    "canonicalize",
    "encode_env_value",
    "fresh",
    "jax_primitive_name",
    "jaxpr_arrays",
    "jaxpr_digest",
    "jaxpr_fingerprint",
    "late_code",
    "primitives_of",
    "lowering_rule_key",
    "memos_on",
    "same_contents",
    "value_digest",
]

# Bumped whenever the canonical form changes meaning, so old keys can never match.
CANON_VERSION = "pcache-canon-2"

_Jaxpr = _compat.Jaxpr
_ClosedJaxpr = _compat.ClosedJaxpr
_Literal = _compat.Literal
_Var = _compat.Var
_DropVar = _compat.DropVar


class JaxprDigest(NamedTuple):
    """``digest``: 32-byte sha256. ``persistent``: False when the digest involves
    process-local objects (callback functions), so only the memory tier may use it."""

    digest: bytes
    persistent: bool
    #: Why not persistent: the first process-local thing the walk met
    #: (``host-callback``, ``user-lowering-rule:<primitive>``, ``unserializable-pytree``).
    why: str = ""
    #: The lowered module is not determined by this digest: the program has host
    #: callbacks (only lowering registers this call's functions) or a primitive
    #: lowered by `mlir.lower_fun` over code outside JAX (it lowers whatever that
    #: code traces to now). Its key is completed by the module (`_key.with_module`),
    #: and every hit lowers.
    relower: bool = False


# Cross-call memos, each keyed by identity, and why that is sound:
#
# * _JAXPR_MEMO: Jaxpr | ClosedJaxpr -> _JaxprMemo. JAX reuses jaxpr objects (an
#   inner jitted function's jaxpr stays the same object while outer wrappers are
#   re-created), but a jaxpr's Literals, consts and params can point at content that
#   CAN change: a user's numpy array (a captured 0-d array becomes a Literal holding
#   the user's buffer), a list or dict param, a lowering rule registered again. So an
#   entry is revalidated by content on every use: it keeps each numpy array the walk
#   encoded with a snapshot of its content (compared again; arrays JAX made itself
#   over a buffer nothing else can reach are exempt, see
#   `_canon_values._literal_buffer_is_private`), and each primitive's
#   lowering-rule entries (compared by identity, kept alive). A walk that met a
#   mutable container (list, dict, set, a non-frozen dataclass) is not memoized.

_JAXPR_MEMO = _memos.memo("canon.jaxprs", IdMemo())


class _JaxprMemo(NamedTuple):
    hexd: str
    persistent: bool
    arrays: tuple  # ((numpy array, its _array_snapshot when the digest was taken), ...)
    rules: tuple  # ((primitive, its lowering-rule entries then), ...)
    registries: tuple  # the lowering registries then (default, per platform)
    checks: tuple  # ((registry.get, primitive, entry), ...): `rules`, flattened
    why: str = ""  # why not persistent (JaxprDigest.why)
    relower: bool = False  # JaxprDigest.relower

    @classmethod
    def make(
        cls, hexd, persistent, arrays, rules: dict, why: str = "", relower: bool = False
    ) -> _JaxprMemo:
        registries = _compat.lowering_registries()
        checks = tuple(
            (registry.get, prim, entry)
            for prim, entries in rules.items()
            for registry, entry in zip(registries, entries, strict=True)
        )
        return cls(
            hexd, persistent, tuple(arrays), tuple(rules.items()), registries, checks, why, relower
        )

    def valid(self) -> bool:
        for a, snapshot in self.arrays:
            if not same_content(a, snapshot):
                return False
        if self.checks:
            registries = _compat.lowering_registries()
            if len(registries) != len(self.registries) or any(
                a is not b for a, b in zip(registries, self.registries, strict=True)
            ):
                return False  # a platform registry added or replaced since
            for get, prim, entry in self.checks:
                if get(prim) is not entry:
                    return False
        return True


def clear_caches() -> None:
    """Forget all memoized digests (tests, or after monkeypatching JAX)."""
    for m in (_JAXPR_MEMO, AVAL_MEMO, CTX_MEMO, ARRAY_MEMO, _LATE_MEMO):
        m.clear()
    RULE_KEYS.clear()


# ----------------------------------------------------------------------------
# Jaxpr walker


def _enc_effects(effs: Any, names: dict, ctx: Ctx) -> str:
    if not effs:
        return ""
    encs = []
    for eff in effs:
        inp = getattr(eff, "input", None)
        if isinstance(inp, _Var):
            # JaxprInputEffect refers to a binder of this jaxpr: use its number.
            n = names.get(inp)
            if n is None:
                raise Uncacheable("unbound-effect-input", qual(type(eff)))
            encs.append(f"{qual(type(eff))}(input={n})")
            continue
        try:
            encs.append(enc_slots(eff, ctx))
        except Unknown as e:
            raise Uncacheable(f"unknown-effect:{qual(type(eff))}:{e.qualname}") from None
    return "!{" + ",".join(sorted(encs)) + "}"


def _enc_literal(lit: Any, ctx: Ctx) -> str:
    val = lit.val
    aval_e = enc_aval(lit.aval, ctx)
    # Every literal is keyed by its content, even one that lowering hoists into an
    # executable argument (jax_use_simplified_jaxpr_constants): over-keying is safe.
    t = type(val)
    if t is bool or t is int or t is float or t is complex:
        v = EXACT[t](val, ctx)
    else:
        try:
            v = enc(val, ctx)
        except Unknown as e:
            raise Uncacheable(f"unknown-literal:{e.qualname}") from None
    return f"lit({v}):{aval_e}"


def _jaxpr_lines(jaxpr: Any, consts: Any, ctx: Ctx) -> list[str]:
    """The canonical lines of one jaxpr (its own variable numbering)."""
    names: dict[Any, str] = {}
    counter = itertools.count()
    lines: list[str] = []

    # inlined IdMemo.get: this is the hot loop
    ctx_d, aval_d = (CTX_MEMO._d, AVAL_MEMO._d) if memos_on() else ({}, {})

    def bind(v: Any) -> str:
        aval = v.aval
        e = aval_d.get(id(aval))
        aenc = e[1] if e is not None and e[0]() is aval else enc_aval(aval, ctx)
        if type(v) is _DropVar:
            return "_:" + aenc
        if v in names:
            raise Uncacheable("rebound-var", "a variable is bound twice")
        if v.initial_qdd is not None or v.final_qdd is not None:
            raise Uncacheable("quasi-dynamic-data", "binder carries QDD (mutable array)")
        n = names[v] = f"v{next(counter)}"
        return f"{n}:{aenc}"

    def use(a: Any) -> str:
        if type(a) is _Literal:
            return _enc_literal(a, ctx)
        n = names.get(a)
        if n is None:
            raise Uncacheable("free-var", "jaxpr uses a variable it does not bind")
        return n

    constvars = jaxpr.constvars
    if consts is None:
        lines.append("const " + " ".join(bind(v) for v in constvars))
    else:
        if len(consts) != len(constvars):
            raise Uncacheable("malformed-jaxpr", "consts/constvars length mismatch")
        # Lowering embeds ClosedJaxpr.consts in the program (mlir._ir_constant), so
        # their content is part of the key.
        lines.append(
            "const "
            + " ".join(
                f"{bind(v)}={_enc_const(c, ctx)}" for v, c in zip(constvars, consts, strict=True)
            )
        )
    lines.append("in " + " ".join(bind(v) for v in jaxpr.invars))
    for eqn in jaxpr.eqns:
        p = eqn.primitive
        rk = _rule_key(p, ctx)
        prim = p.name
        ins = " ".join([use(a) for a in eqn.invars])
        params = enc_params(prim, eqn.params, ctx) if eqn.params else ""
        outs = " ".join([bind(v) for v in eqn.outvars])
        ectx = eqn.ctx
        e = ctx_d.get(id(ectx))
        cenc = e[1] if e is not None and e[0]() is ectx else enc_eqn_ctx(ectx, ctx)
        # The primitive's name and its lowering rule: two rules for one name, or a rule
        # registered again, are other programs.
        line = f"{outs} = {enc_str(prim)}<{rk.token}>[{params}] {ins} @{cenc}"
        if eqn.effects:
            line += _enc_effects(eqn.effects, names, ctx)
        lines.append(line)
    lines.append("out " + " ".join(use(a) for a in jaxpr.outvars))
    if jaxpr.effects:
        lines.append("effects " + _enc_effects(jaxpr.effects, names, ctx))
    return lines


def _rule_key(p: Any, ctx: Ctx) -> RuleKey:
    """``p``'s `RuleKey` (looked up once per walk), noted for the jaxpr being
    digested: its lowering-rule entries (what a memo of the jaxpr rests on), and
    what it says of the program (process-local, keyed by its module too)."""
    rk = ctx.rule_keys.get(p)
    if rk is None:
        if p.name in STATEFUL_PRIMS:
            raise Uncacheable(f"stateful:{p.name}", "its executable holds state of its own")
        rk = ctx.rule_keys[p] = lowering_rule_key(p)
    if p not in ctx.rules:
        ctx.rules[p] = rk.entries
        if rk.persistent and not baseline_rule(p, rk.entries) and any(map(_changeable, rk.entries)):
            # (a rule registered since pcache first read JAX's tables, described by
            # content, over data the program may change in place: described afresh at
            # every use, so no digest over it is kept either, review 98; one that is
            # not described is relowered at every hit anyway)
            ctx.volatile = True
    if not rk.persistent:
        # The lowering is user code the key cannot see: memory tier only, and the
        # key names the rule itself (rk.token is unique to those rule objects).
        ctx.persistent = False
        ctx.local_why = ctx.local_why or f"user-lowering-rule:{p.name}"
    if rk.traced or not rk.persistent or p.name in CALLBACK_LOWERING_PRIMS:
        # Host callbacks (this call's functions), or a rule whose code lowers to
        # whatever it does now (`mlir.lower_fun` over user code, any user rule:
        # it may read a global): the module completes the key
        # (JaxprDigest.relower), so a hit is always what lowering gives now.
        ctx.relower = True
    return rk


def _changeable(entry: Any) -> bool:
    """Whether a lowering-rule entry holds state (`holds_state`) or a partial with
    keywords (a dict the program may write) anywhere it reaches."""
    if entry is None:
        return False
    todo, seen = [getattr(entry, "rule", entry)], set()
    while todo:
        o = todo.pop()
        if id(o) in seen or len(seen) > 256:
            return len(seen) > 256
        seen.add(id(o))
        if type(o) is functools.partial:
            if o.keywords:
                return True
            todo += [o.func, *o.args]
        elif type(o) is types.FunctionType:
            todo += [c.cell_contents for c in o.__closure__ or () if cell_bound(c)]
            todo += list(o.__defaults__ or ())
    return holds_state(getattr(entry, "rule", entry))


def _enc_const(c: Any, ctx: Ctx) -> str:
    try:
        return enc(c, ctx)
    except Unknown as e:
        raise Uncacheable(f"unknown-const:{e.qualname}") from None


def _sub_jaxpr(obj: Any, ctx: Ctx) -> str:
    """A Jaxpr/ClosedJaxpr param: expanded in text mode, its digest otherwise."""
    if isinstance(obj, _ClosedJaxpr):
        jaxpr, consts, tag = obj.jaxpr, obj.consts, "CJ"
    else:
        jaxpr, consts, tag = obj, None, "J"
    if ctx.text:
        ctx.depth += 1
        try:
            lines = _jaxpr_lines(jaxpr, consts, ctx)
        finally:
            ctx.depth -= 1
        pad = "  " * (ctx.depth + 1)
        return f"{tag}{{\n" + "".join(f"{pad}{ln}\n" for ln in lines) + "  " * ctx.depth + "}"
    return f"{tag}:{_digest_jaxpr(obj, jaxpr, consts, ctx)}"


_canon_values.encode_sub_jaxpr = _sub_jaxpr  # a value that is a jaxpr: walked here


def _digest_jaxpr(obj: Any, jaxpr: Any, consts: Any, ctx: Ctx) -> str:
    """The digest of a (sub-)jaxpr, and what it rests on added to the enclosing one's.

    A jaxpr object may be reached several times in one walk (one inner function
    called from a cond branch and from a scan body): every enclosing jaxpr, however
    it reached it, records the arrays and rules this one rests on and whether it is
    process-local, or its own memo entry would be revalidated against too little.
    """
    got = ctx.call_memo.get(id(obj))
    if got is not None and got[0] is obj:
        _, hexd, persistent, why, volatile, arrays, rules, relower = got
    else:
        memo = None if ctx.lib_callbacks is not None else _JAXPR_MEMO.get(obj)  # (another digest)
        if memo is not None and memo.valid():
            hexd, persistent, why, volatile = memo.hexd, memo.persistent, memo.why, False
            relower = memo.relower
            arrays, rules = memo.arrays, memo.rules
        else:
            saved = (
                ctx.persistent, ctx.local_why, ctx.volatile, ctx.arrays, ctx.rules, ctx.relower
            )  # fmt: skip
            ctx.persistent, ctx.local_why, ctx.volatile, ctx.relower = True, "", False, False
            ctx.arrays, ctx.rules = [], {}
            try:
                lines = _jaxpr_lines(jaxpr, consts, ctx)
                hexd = hashlib.sha256("\n".join(lines).encode()).hexdigest()
                persistent, why, volatile = ctx.persistent, ctx.local_why, ctx.volatile
                relower = ctx.relower
                arrays, rules = tuple(ctx.arrays), tuple(ctx.rules.items())
            finally:
                (
                    ctx.persistent, ctx.local_why, ctx.volatile, ctx.arrays, ctx.rules, ctx.relower
                ) = saved  # fmt: skip
            # One over a mutable container cannot be revalidated cheaply: not kept.
            if not volatile and ctx.lib_callbacks is None:
                memo = _JaxprMemo.make(hexd, persistent, arrays, dict(rules), why, relower)
                _JAXPR_MEMO.put(obj, memo)
        ctx.call_memo[id(obj)] = (obj, hexd, persistent, why, volatile, arrays, rules, relower)
    ctx.persistent = ctx.persistent and persistent
    ctx.local_why = ctx.local_why or why
    ctx.volatile = ctx.volatile or volatile
    ctx.relower = ctx.relower or relower
    ctx.arrays.extend(arrays)
    ctx.rules.update(rules)
    return hexd


def _as_jaxpr(closed_jaxpr: Any) -> tuple[Any, Any]:
    if isinstance(closed_jaxpr, _ClosedJaxpr):
        return closed_jaxpr.jaxpr, closed_jaxpr.consts
    if isinstance(closed_jaxpr, _Jaxpr):
        return closed_jaxpr, None
    raise TypeError(f"expected a ClosedJaxpr or Jaxpr, got {type(closed_jaxpr).__name__}")


def jaxpr_fingerprint(closed_jaxpr: Any, lib_callbacks: Any = None) -> JaxprDigest:
    """Digest of the canonical form of ``closed_jaxpr``, and whether it may be persisted.

    Every literal is keyed by its content (also those lowering hoists into
    executable arguments), which is always safe. ``lib_callbacks``: what names a
    library's callback closure over data by its content (`pcache._lib_callbacks.
    content`), as a persisted trace holds one; None: every callback is process-local.
    """
    jaxpr, consts = _as_jaxpr(closed_jaxpr)
    ctx = Ctx()
    ctx.lib_callbacks = lib_callbacks
    try:
        hexd = _digest_jaxpr(closed_jaxpr, jaxpr, consts, ctx)
    except Unknown as e:  # e.g. an aval of an extended dtype the encoder does not know
        raise Uncacheable(f"unknown-value:{e.qualname}") from None
    handlers, plain = lowering_key()
    if not plain:  # (a program's lowering handler or rule override: keyed by its module)
        ctx.persistent, ctx.relower = False, True
        ctx.local_why = ctx.local_why or "user-lowering-handler"
    text = f"{CANON_VERSION}\n{hexd}" + (f"\n{handlers}" if handlers else "")
    d = hashlib.sha256(text.encode()).digest()
    return JaxprDigest(d, ctx.persistent, "" if ctx.persistent else ctx.local_why, ctx.relower)


def lowering_key() -> tuple[str, bool]:
    """``(token, persistent)`` of the lowering state outside the jaxpr: the handlers
    (`_canon_rules.lowering_handlers_key`) and every overridden rule or handler
    (`_canon_rules.overrides_key`: a rule the jaxpr does not name may be bound while
    lowering another's)."""
    handlers, plain = _canon_rules.lowering_handlers_key()
    over, persistent = _canon_rules.overrides_key(jax_primitive_name)
    return ";".join(t for t in (handlers, over) if t), plain and persistent


def jaxpr_arrays(closed_jaxpr: Any) -> tuple | None:
    """The user numpy buffers ``closed_jaxpr`` holds (its constants and literals, in
    every sub-jaxpr), each with a snapshot of its content now: ((array, snapshot),
    ...), checked by `same_contents`. None where the walk met a mutable container,
    whose content cannot be snapshotted this way. Raises `Uncacheable` like
    `jaxpr_fingerprint` (whose memo it shares)."""
    jaxpr, consts = _as_jaxpr(closed_jaxpr)
    ctx = Ctx()
    try:
        _digest_jaxpr(closed_jaxpr, jaxpr, consts, ctx)
    except Unknown as e:
        raise Uncacheable(f"unknown-value:{e.qualname}") from None
    return None if ctx.volatile else tuple(ctx.arrays)


_LATE_MEMO = _memos.memo("canon.late", IdMemo())


def _key_impl(v: Any, found: list) -> None:
    dt = getattr(getattr(v, "aval", None), "dtype", None)
    if isinstance(dt, _compat.KeyTy):
        found.extend(f for f in getattr(dt, "_impl", ()) if callable(f))


def late_code(closed_jaxpr: Any) -> tuple[bool, tuple]:
    """What in ``closed_jaxpr`` (any sub-jaxpr included) runs Python after tracing:
    (whether it calls Python at run time: `pure_callback`, `io_callback`,
    `jax.debug.callback`/`print`; the Python callables its params hold, which JAX
    calls when the program is transformed later: a `custom_vjp`'s bwd, a
    `custom_jvp`'s jvp thunk, a remat policy). Jaxprs are immutable: memoized."""
    got = _LATE_MEMO.get(closed_jaxpr)
    if got is not None:
        return got
    jaxpr = closed_jaxpr.jaxpr if isinstance(closed_jaxpr, _ClosedJaxpr) else closed_jaxpr
    callbacks = False
    found: list = []
    # (a PRNG key's impl: its functions run when the program is lowered: review 37)
    for v in (*jaxpr.invars, *jaxpr.constvars):
        _key_impl(v, found)
    for eqn in jaxpr.eqns:
        if eqn.primitive.name in CALLBACK_LOWERING_PRIMS:
            callbacks = True
        for v in eqn.outvars:
            _key_impl(v, found)
        for v in eqn.params.values():
            for j in v if isinstance(v, (tuple, list)) else (v,):
                if isinstance(j, (_ClosedJaxpr, _Jaxpr)):
                    sub_cb, sub_found = late_code(j)
                    callbacks = callbacks or sub_cb
                    found.extend(sub_found)
                elif hasattr(j, "f_transformed") or (  # JAX's WrappedFun is not callable
                    callable(j) and not isinstance(j, (type, _compat.Primitive))
                ):
                    found.append(j)
    out = (callbacks, tuple(found))
    _LATE_MEMO.put(closed_jaxpr, out)
    return out


def primitives_of(closed_jaxpr: Any, out: dict | None = None) -> dict:
    """Every primitive ``closed_jaxpr`` binds (any sub-jaxpr included), by id."""
    out = {} if out is None else out
    jaxpr = closed_jaxpr.jaxpr if isinstance(closed_jaxpr, _ClosedJaxpr) else closed_jaxpr
    for eqn in jaxpr.eqns:
        out[id(eqn.primitive)] = eqn.primitive
        for v in eqn.params.values():
            for j in v if isinstance(v, (tuple, list)) else (v,):
                if isinstance(j, (_ClosedJaxpr, _Jaxpr)):
                    primitives_of(j, out)
    return out


def same_contents(arrays: tuple) -> bool:
    """Whether every array of `jaxpr_arrays` still holds its snapshot's content."""
    return all(same_content(a, snapshot) for a, snapshot in arrays)


def jaxpr_digest(closed_jaxpr: Any, lib_callbacks: Any = None) -> bytes:
    """32-byte digest of the canonical form (see ``jaxpr_fingerprint``).

    Callers that persist must use ``jaxpr_fingerprint`` to learn whether they may.
    """
    return jaxpr_fingerprint(closed_jaxpr, lib_callbacks).digest


def canonical_text(closed_jaxpr: Any) -> str:
    """The canonical form as text: equal texts <=> equal digests."""
    jaxpr, consts = _as_jaxpr(closed_jaxpr)
    ctx = Ctx(text=True)
    try:
        return "\n".join(_jaxpr_lines(jaxpr, consts, ctx)) + "\n"
    except Unknown as e:
        raise Uncacheable(f"unknown-value:{e.qualname}") from None


# ----------------------------------------------------------------------------
# Public value encoding


def canonicalize(obj: Any, sink: Any = None, *, allow_local: bool = False) -> str:
    """Canonical text encoding of a value (shardings, layouts, devices, options...).

    If ``sink`` is given, the encoding is also passed to ``sink.update`` (a hashlib
    object) as UTF-8. Raises Uncacheable for a type without a canonical form, and for
    process-local objects (functions) unless ``allow_local``.
    """
    ctx = Ctx()
    ctx.allow_local = allow_local
    try:
        s = enc(obj, ctx)
    except Unknown as e:
        raise Uncacheable(f"unknown-value:{e.qualname}") from None
    if not ctx.persistent and not allow_local:
        raise Uncacheable("process-local-value", qual(type(obj)))
    if ctx.relower:  # a value only a lowered module could complete (a user primitive)
        raise Uncacheable("module-keyed-value", qual(type(obj)))
    if sink is not None:
        sink.update(s.encode())
    return s


def value_digest(obj: Any) -> bytes:
    """sha256 of ``canonicalize(obj)``."""
    h = hashlib.sha256(b"pcache-value\n")
    canonicalize(obj, h)
    return h.digest()


def encode_env_value(name: str, value: Any) -> str:
    """The canonical encoding of a configuration value for the key's environment
    parts; Uncacheable if it has none or is process-local."""
    ctx = Ctx()
    try:
        s = enc(value, ctx)
    except Unknown as e:
        raise Uncacheable(f"env-config:{name}:{e.qualname}") from None
    if not ctx.persistent or ctx.relower:
        raise Uncacheable(f"env-config:{name}:process-local")
    return s
