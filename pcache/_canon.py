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

Python callables bound into the executable (pure_callback, io_callback, debug
callbacks, custom_partitioning) cannot be persisted: they are keyed by object
identity, and the result is marked ``persistent=False`` (memory tier only).
"""

from __future__ import annotations

import collections
import contextlib
import contextvars
import dataclasses
import enum
import hashlib
import itertools
import json
import logging
import os
import secrets
import struct
import sys
import threading
import weakref
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import jax
import numpy as np

from pcache import _compat, _memos
from pcache._errors import Uncacheable

__all__ = [
    "BoundedMemo",
    "JaxprDigest",
    "RuleKey",
    "canonical_text",
    "canonicalize",
    "encode_env_value",
    "lowering_rule_key",
    "jaxpr_digest",
    "jaxpr_fingerprint",
    "value_digest",
]

logger = logging.getLogger("pcache")

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


# ----------------------------------------------------------------------------
# Errors inside the encoder


class _Unknown(Exception):
    """An object the encoder has no rule for; re-raised as Uncacheable with context."""

    def __init__(self, qualname: str) -> None:
        super().__init__(qualname)
        self.qualname = qualname


def _qual(t: type) -> str:
    return f"{t.__module__}.{t.__qualname__}"


# ----------------------------------------------------------------------------
# Identity memo: maps live objects (by identity) to a value, forgetting an entry
# when its object dies, so a recycled id() can never return a stale value.


# While set (``fresh()``), every memo here and in `pcache._key` and `pcache._jit_seam` answers "not known"
# and stores nothing: `JAX_PCACHE_CHECK=1` recomputes each key this way and compares.
_MEMO_OFF: contextvars.ContextVar[bool] = contextvars.ContextVar("pcache_memo_off", default=False)


@contextlib.contextmanager
def fresh():
    """Compute without any memo (what the checking mode compares against)."""
    token = _MEMO_OFF.set(True)
    try:
        yield
    finally:
        _MEMO_OFF.reset(token)


def memos_on() -> bool:
    return not _MEMO_OFF.get()


class _IdMemo:
    """Live object (by identity, weakly referenced) -> value.

    Sound only for objects whose content cannot change while they live: each memo
    below says why its objects qualify. The weak reference forgets an entry when its
    object dies, so a recycled ``id()`` never finds another object's value.
    """

    def __init__(self, *, registry: bool = False) -> None:
        self._d: dict[int, tuple[Any, Any]] = {}
        self._lock = threading.Lock()
        # A registry (identity tokens) is not a memo of content: `fresh()` keeps it.
        self._switch = None if registry else _MEMO_OFF

    def get(self, obj: Any) -> Any:
        if self._switch is not None and self._switch.get():
            return None
        e = self._d.get(id(obj))
        if e is not None and e[0]() is obj:
            return e[1]
        return None

    def put(self, obj: Any, value: Any) -> None:
        if self._switch is not None and self._switch.get():
            return
        k = id(obj)
        d = self._d

        def _drop(ref: weakref.ref, k: int = k) -> None:
            e = d.get(k)
            if e is not None and e[0] is ref:
                d.pop(k, None)

        try:
            ref = weakref.ref(obj, _drop)
        except TypeError:  # not weak-referenceable: don't memoize
            return
        with self._lock:
            d[k] = (ref, value)

    def clear(self) -> None:
        with self._lock:
            self._d.clear()

    def __len__(self) -> int:
        return len(self._d)


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
#   `_compat.literal_buffer_is_private`), and each primitive's
#   lowering-rule entries (compared by identity, kept alive). A walk that met a
#   mutable container (list, dict, set, a non-frozen dataclass) is not memoized.
# * _AVAL_MEMO: ShapedArray -> encoding. Avals are immutable values (JAX hashes and
#   compares them by content and never mutates one).
# * _CTX_MEMO: JaxprEqnContext -> encoding. Immutable records, built once per context.
# * _ARRAY_MEMO: jax.Array -> content encoding. JAX arrays are immutable (JAX's array
#   contract; an array's buffer is never written after creation).
_JAXPR_MEMO = _memos.memo("canon.jaxprs", _IdMemo())
_AVAL_MEMO = _memos.memo("canon.avals", _IdMemo())
_CTX_MEMO = _memos.memo("canon.contexts", _IdMemo())
_ARRAY_MEMO = _memos.memo("canon.arrays", _IdMemo())


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
            if not _same_content(a, snapshot):
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


# Process-local identity tokens for objects that cannot be persisted (callbacks).
_LOCAL_LOCK = threading.Lock()
# In every local token with the pid: a key that names process-local objects must not
# match one from another process that happened to get the same pid and serial.
_PROCESS_NONCE = secrets.token_hex(8)
_LOCAL_SERIAL = itertools.count()
# Identity tokens, not memos: a live object keeps its serial, a dead one's serial is
# never reused (weak references; objects without weakref support are kept alive).
_LOCAL_IDS = _IdMemo(registry=True)
_LOCAL_STRONG: dict[int, tuple[Any, int]] = {}  # for objects without weakref support


def clear_caches() -> None:
    """Forget all memoized digests (tests, or after monkeypatching JAX)."""
    for m in (_JAXPR_MEMO, _AVAL_MEMO, _CTX_MEMO, _ARRAY_MEMO, _LATE_MEMO):
        m.clear()
    _RULE_KEYS.clear()


def local_token(obj: Any) -> str:
    """A token unique to this live object in this process (never reused for another)."""
    with _LOCAL_LOCK:
        serial = _LOCAL_IDS.get(obj)
        if serial is None:
            e = _LOCAL_STRONG.get(id(obj))
            if e is not None and e[0] is obj:
                serial = e[1]
        if serial is None:
            serial = next(_LOCAL_SERIAL)
            try:
                weakref.ref(obj)
            except TypeError:
                # Keep it alive so its id() is never reused for another object.
                _LOCAL_STRONG[id(obj)] = (obj, serial)
            else:
                _LOCAL_IDS.put(obj, serial)
    return f"local:{os.getpid()}:{_PROCESS_NONCE}:{serial}"


# ----------------------------------------------------------------------------
# Walk context


class _Ctx:
    __slots__ = (
        "persistent",
        "local_why",
        "allow_local",
        "in_params",
        "text",
        "call_memo",
        "depth",
        "arrays",
        "rules",
        "rule_keys",
        "volatile",
        "relower",
    )

    def __init__(self, *, text: bool = False) -> None:
        self.persistent = True
        self.local_why = ""  # why not persistent (the first reason met)
        self.allow_local = False  # True while encoding a callback primitive's params
        # True while encoding the params of a primitive not in _LOCAL_CALLABLE_PRIMS
        # (whose Python never runs at compile time): see _enc_treedef.
        self.in_params = False
        self.text = text
        self.call_memo: dict[int, tuple[Any, str]] = {}
        self.depth = 0
        # What the jaxpr being digested rests on (see _JaxprMemo): numpy arrays with
        # their encodings, primitives with their lowering-rule entries; and whether
        # it met a mutable container (then it is not memoized).
        self.arrays: list[tuple[Any, tuple]] = []
        self.rules: dict[Any, tuple] = {}
        self.rule_keys: dict[Any, Any] = {}  # primitive -> RuleKey, per walk
        self.volatile = False
        self.relower = False  # see JaxprDigest.relower


# ----------------------------------------------------------------------------
# Value encoding


def _enc_float(x: float) -> str:
    return "f" + struct.pack("<d", x).hex()


_STR_CACHE: dict[str, str] = {}  # keyed by the string's value (immutable): sound


def _enc_str(x: str) -> str:
    # Cache by exact str (param names, primitive names, axis names repeat a lot).
    e = _STR_CACHE.get(x)
    if e is None:
        e = json.dumps(x)  # quoted, escaped, ASCII: injective
        if type(x) is str and len(_STR_CACHE) < 100_000:
            _STR_CACHE[x] = e
    return e


# Keyed by dtype value (np.dtype hashes and compares by content); dtypes with fields
# or metadata, whose equality is looser than their encoding, are never stored.
_DTYPE_CACHE: dict[Any, str] = {}


def _enc_dtype(dt: Any) -> str:
    e = _DTYPE_CACHE.get(dt) if type(dt) is not str else None
    if e is not None:
        return e
    e = _enc_dtype_uncached(dt)
    if isinstance(dt, np.dtype) and not dt.fields and dt.metadata is None:
        _DTYPE_CACHE[dt] = e
    return e


def _enc_dtype_uncached(dt: Any) -> str:
    if isinstance(dt, np.dtype):
        # name separates ml_dtypes (bfloat16, float8_*) whose .str is an opaque 'V';
        # a non-native byte order is spelled out.
        return dt.name if dt.isnative else f"{dt.name}:{dt.str}"
    if isinstance(dt, _compat.KeyTy):
        return f"dt:key<{_enc_prng_impl(dt._impl)}>"
    raise _Unknown(_qual(type(dt)))


def _enc_prng_impl(impl: Any) -> str:
    # A PRNGImpl is a NamedTuple of functions; it is identified by its registered name.
    # Only accept the impl that is registered under that name, so a user impl that
    # reuses a name can't alias a built-in one.
    if _compat.registered_prng_impls.get(impl.name) is not impl:
        raise _Unknown("unregistered-prng-impl:" + _qual(type(impl)))
    for f in impl:
        # JAX lowers random bits through the impl's Python (``lower_fun``): only
        # JAX's own impls are named by their name; another's code is not keyed.
        if callable(f) and not str(getattr(f, "__module__", "")).startswith("jax."):
            raise _Unknown("user-prng-impl:" + _enc_str(str(impl.name)))
    return f"prng:{_enc_str(impl.name)}:{_enc_str(impl.tag)}:{impl.key_shape!r}"


def _array_content(a: np.ndarray) -> str:
    return _array_snapshot(a)[0]


def _array_snapshot(a: np.ndarray) -> tuple[str, tuple]:
    """The content encoding of ``a``, and a snapshot that is cheap to compare:
    (shape, dtype, the bytes or, above 64 bytes, their sha256)."""
    a = np.asarray(a)
    if a.dtype == object:
        raise _Unknown("object-array")
    data = np.ascontiguousarray(a).tobytes()
    if len(data) <= 64:
        body, snap = data.hex(), data
    else:
        snap = hashlib.sha256(data).digest()
        body = "sha256:" + snap.hex()
    shape = ",".join(map(str, a.shape))
    return f"nd({_enc_dtype(a.dtype)};{shape};{body})", (a.shape, a.dtype, snap)


def _same_content(a: np.ndarray, snapshot: tuple) -> bool:
    shape, dtype, snap = snapshot
    if a.shape != shape or (a.dtype is not dtype and a.dtype != dtype):  # reassignable
        return False
    data = a.tobytes()  # C order, as the snapshot
    return data == snap if len(data) <= 64 else hashlib.sha256(data).digest() == snap


def _enc_jax_array(x: Any) -> str:
    if isinstance(x, jax.core.Tracer):
        raise Uncacheable("tracer-in-jaxpr", "a Tracer leaked into a jaxpr param/const")
    if x.is_deleted():  # deleted or donated: lowering it raises, as it must
        raise Uncacheable("deleted-array", "a deleted or donated array in a jaxpr")
    e = _ARRAY_MEMO.get(x)
    if e is None:
        dt = x.dtype
        if isinstance(dt, np.dtype):
            e = _array_content(np.asarray(x))
        else:  # typed PRNG keys: key data + key type
            e = f"keyarr({_enc_dtype(dt)};{_array_content(np.asarray(jax.random.key_data(x)))})"
        _ARRAY_MEMO.put(x, e)  # jax.Arrays are immutable
    return e


def _enc_seq(items: Any, ctx: _Ctx) -> str:
    return ",".join([_enc(v, ctx) for v in items])


def _enc_partition_spec(p: Any, ctx: _Ctx) -> str:
    parts = []
    for e in _compat.partition_spec_entries(p):
        if e is None:
            parts.append("N")
        elif e is jax.sharding.PartitionSpec.UNCONSTRAINED:
            parts.append("UNC")
        elif isinstance(e, str):
            parts.append(_enc_str(e))
        elif isinstance(e, tuple):
            parts.append("(" + _enc_seq(e, ctx) + ")")
        else:
            raise _Unknown("partition-spec-entry:" + _qual(type(e)))
    return (
        f"P({','.join(parts)};u={_enc(frozenset(p.unreduced), ctx)};"
        f"r={_enc(frozenset(p.reduced), ctx)})"
    )


def _enc_device(d: Any) -> str:
    return f"dev({_enc_str(d.platform)},{int(d.id)})"


def _enc_mesh(m: Any, ctx: _Ctx) -> str:
    if m.empty:
        return "Mesh()"
    ids = ",".join(str(int(d.id)) for d in m.devices.flat)
    plat = m.devices.flat[0].platform if m.devices.size else ""
    return (
        f"Mesh(names=({_enc_seq(m.axis_names, ctx)});sizes={tuple(m.axis_sizes)!r};"
        f"types=({_enc_seq(m.axis_types, ctx)});plat={_enc_str(plat)};ids=({ids}))"
    )


def _enc_abstract_mesh(m: Any, ctx: _Ctx) -> str:
    ad = m.abstract_device
    ad_enc = (
        "N"
        if ad is None
        else (
            f"AD({_enc(ad.device_kind, ctx)},{_enc(ad.num_cores, ctx)},"
            f"{_enc(_compat.abstract_device_platform(ad), ctx)})"
        )
    )
    return (
        f"AMesh(names=({_enc_seq(m.axis_names, ctx)});sizes={tuple(m.axis_sizes)!r};"
        f"types=({_enc_seq(m.axis_types, ctx)});dev={ad_enc})"
    )


def _enc_named_sharding(s: Any, ctx: _Ctx) -> str:
    return (
        f"NS({_enc(s.mesh, ctx)};{_enc_partition_spec(s.spec, ctx)};"
        f"mk={_enc(s.memory_kind, ctx)};"
        f"ids={_enc(_compat.named_sharding_logical_device_ids(s), ctx)})"
    )


def _enc_shaped_array(a: Any, ctx: _Ctx) -> str:
    e = _AVAL_MEMO.get(a)
    if e is not None:
        return e
    shape = []
    for d in a.shape:
        if type(d) is not int:
            raise Uncacheable("dynamic-shapes", f"symbolic dimension of type {_qual(type(d))}")
        shape.append(str(d))
    head = f"{_enc_dtype(a.dtype)}[{','.join(shape)}]" + ("w" if a.weak_type else "")
    extras = _aval_extras(a, ctx)
    # The common case (no sharding, no manual axes, device memory) is written as the
    # bare head; anything else as head + "{extras}". Injective: omitted means default.
    if extras != _default_extras(len(shape), ctx):
        head += "{" + extras + "}"
    parts = [head]
    e = ";".join(parts)
    _AVAL_MEMO.put(a, e)
    return e


def _aval_extras(a: Any, ctx: _Ctx) -> str:
    # Every slot of ShapedArray, including ones added by future JAX versions.
    return ";".join(
        f"{slot}={_enc(getattr(a, slot, None), ctx)}"
        for slot in _SHAPED_ARRAY_SLOTS
        if slot not in ("shape", "dtype", "weak_type")
    )


_DEFAULT_EXTRAS: dict[int, str] = {}  # keyed by ndim (a pure function of it): sound


def _default_extras(ndim: int, ctx: _Ctx) -> str:
    e = _DEFAULT_EXTRAS.get(ndim)
    if e is None:
        e = _DEFAULT_EXTRAS[ndim] = _aval_extras(_compat.ShapedArray((1,) * ndim, np.float32), ctx)
    return e


_SHAPED_ARRAY_SLOTS = tuple(s for s in _compat.ShapedArray.__slots__ if s != "__weakref__")


def _enc_aval(a: Any, ctx: _Ctx) -> str:
    t = type(a)
    if t is _compat.ShapedArray:
        return _enc_shaped_array(a, ctx)
    if t is _compat.AbstractToken:
        return "token"
    if t is _compat.AbstractRef:  # a mutable ref (state primitives, Pallas kernels)
        return _enc_slots(a, ctx)
    raise Uncacheable("unknown-aval", _qual(t))


def _enc_slots(obj: Any, ctx: _Ctx) -> str:
    """Type name + every slot/attribute value (for small JAX records without __eq__)."""
    names: list[str] = []
    for klass in type(obj).__mro__:
        for s in getattr(klass, "__slots__", ()):
            if s not in ("__weakref__", "__dict__") and s not in names:
                names.append(s)
    items = [(n, getattr(obj, n)) for n in names if hasattr(obj, n)]
    if hasattr(obj, "__dict__"):
        items += sorted(vars(obj).items())
    body = ",".join(f"{n}={_enc(v, ctx)}" for n, v in items)
    return f"{_qual(type(obj))}({body})"


def _enc_callable(fn: Any, ctx: _Ctx) -> str:
    if not ctx.allow_local:
        raise _Unknown(_qual(type(fn)))
    ctx.persistent = False
    ctx.local_why = ctx.local_why or "host-callback"
    return local_token(fn)


def _enc_treedef(t: Any, ctx: _Ctx) -> str:
    try:
        return "treedef:" + t.serialize_using_proto().hex()
    except Exception:  # noqa: BLE001 - custom pytree nodes can't be serialized
        if ctx.in_params:
            # A param of a primitive whose Python never runs at compile time
            # (equinox's filter primitives: lineax's linear_solve, optimistix):
            # what the treedef changes in the program, lowering writes into the
            # module, which completes the key (JaxprDigest.relower). Not memory-only:
            # JAX's own cache would store such a program by its module too.
            ctx.relower = True
            return f"treedef:module-keyed:{int(t.num_leaves)}:{int(t.num_nodes)}"
        # Process-local, by equality: PyTreeDef is hashable and compares structurally,
        # including custom node aux data.
        ctx.persistent = False
        ctx.local_why = ctx.local_why or "unserializable-pytree"
        return "treedef:" + _local_eq_token(t)


# Process-local tokens for treedefs that cannot be serialized, keyed by PyTreeDef
# equality (structural, with custom nodes' aux data compared by __eq__). Sound for
# aux data with value semantics, which JAX requires of it (aux data must be hashable
# and comparable; JAX's own caches key on the same equality).
_LOCAL_EQ: dict[Any, int] = {}


def _local_eq_token(obj: Any) -> str:
    with _LOCAL_LOCK:
        serial = _LOCAL_EQ.get(obj)
        if serial is None:
            serial = _LOCAL_EQ[obj] = next(_LOCAL_SERIAL)
    return f"localeq:{os.getpid()}:{_PROCESS_NONCE}:{serial}"


def _enc(obj: Any, ctx: _Ctx) -> str:
    """Canonical, injective, type-tagged text encoding of a value."""
    t = type(obj)
    f = _EXACT.get(t)
    if f is not None:
        return f(obj, ctx)
    # Subclasses and families (order matters: bool < int, NamedTuple < tuple).
    if isinstance(obj, enum.Enum):
        return f"E:{_qual(t)}.{obj.name}"
    if isinstance(obj, np.dtype):
        return _enc_dtype(obj)
    if isinstance(obj, np.generic):
        return f"ns({_enc_dtype(obj.dtype)};{obj.tobytes().hex()})"
    if isinstance(obj, np.ndarray):
        enc, snapshot = _array_snapshot(obj)
        if not _compat.literal_buffer_is_private(obj):
            ctx.arrays.append((obj, snapshot))  # mutable: a memo over it revalidates it
        return enc
    if isinstance(obj, (_Jaxpr, _ClosedJaxpr)):
        return _sub_jaxpr(obj, ctx)
    if isinstance(obj, jax.Array):
        return _enc_jax_array(obj)
    if isinstance(obj, _compat.KeyTy):
        return _enc_dtype(obj)
    if isinstance(obj, tuple) and hasattr(t, "_fields"):
        if isinstance(obj, _compat.PRNGImpl):
            return _enc_prng_impl(obj)
        return f"T:{_qual(t)}(" + _enc_seq(obj, ctx) + ")"
    if isinstance(obj, bool):
        return "T" if obj else "F"
    if isinstance(obj, int):
        return f"i:{_qual(t)}:{int(obj)}"
    if isinstance(obj, float):
        return f"{_qual(t)}:{_enc_float(float(obj))}"
    if isinstance(obj, str):
        return f"{_qual(t)}:{_enc_str(str(obj))}"
    if isinstance(obj, tuple):
        return f"{_qual(t)}(" + _enc_seq(obj, ctx) + ")"
    if isinstance(obj, jax.sharding.NamedSharding):
        return _enc_named_sharding(obj, ctx)
    if isinstance(obj, jax.sharding.PartitionSpec):
        return _enc_partition_spec(obj, ctx)
    if isinstance(obj, (frozenset, set)):
        if not isinstance(obj, frozenset):
            ctx.volatile = True
        return "fs{" + ",".join(sorted(_enc(v, ctx) for v in obj)) + "}"
    if isinstance(obj, Mapping):
        ctx.volatile = True  # a mapping's content can change under the same object
        items = sorted((_enc(k, ctx), _enc(v, ctx)) for k, v in obj.items())
        return f"M:{_qual(t)}{{" + ",".join(f"{k}:{v}" for k, v in items) + "}"
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        if not obj.__dataclass_params__.frozen:
            ctx.volatile = True
        body = ",".join(
            f"{fl.name}={_enc(getattr(obj, fl.name), ctx)}" for fl in dataclasses.fields(obj)
        )
        return f"D:{_qual(t)}({body})"
    if obj is _compat.no_axis_name:  # vmap's sentinel for "no axis name"
        return "no_axis_name"
    if isinstance(obj, _compat.Primitive):
        return _enc_primitive(obj, ctx)
    if isinstance(obj, _compat.Effect):  # debug_callback's effect param (a singleton)
        return "eff:" + _enc_slots(obj, ctx)
    if isinstance(obj, (_Var, _Literal)):
        raise _Unknown("unbound-" + _qual(t))
    if callable(obj):
        return _enc_callable(obj, ctx)
    raise _Unknown(_qual(t))


# ----------------------------------------------------------------------------
# Primitives as values (a param holding a Primitive object)
#
# JAX's own: `select_and_scatter_add`/`select_and_gather_add` carry `select_prim`
# (``lax.ge_p`` or ``lax.le_p``) and their lowering tests it by identity. Outside
# JAX: equinox's `vprim` carries the user primitive it batches (``prim``); its
# lowering (`mlir.lower_fun` over equinox code) looks the primitive's rules up by
# identity. Two primitive objects can share a name, so a name alone is not enough:
#
# * a primitive JAX defines at module level (found by identity among the module
#   attributes of the loaded ``jax.*`` modules) is keyed by where it was found
#   (``module:attribute``, the first in sorted order when the first scan that
#   found it saw it in several): with this JAX (in the key), the same object in
#   every process. A process that loaded other re-exporting modules first may name
#   it otherwise: a miss, never another primitive;
# * any other primitive (a user's, one JAX makes inside a function) is keyed by its
#   name and type, and the program by its lowered module too (`JaxprDigest.relower`):
#   the module is what XLA compiles, so a hit is never another primitive's program.

_JAX_PRIMS_LOCK = threading.Lock()
_JAX_PRIMS: dict[int, tuple[Any, str]] = {}  # id -> (primitive, "module:attribute")
_JAX_PRIMS_SEEN: set[str] = set()  # the jax.* modules already scanned


def _scan_jax_primitives() -> None:
    """Index the Primitive objects the loaded ``jax.*``/``jaxlib.*`` modules hold
    as attributes (modules imported since the last scan only; a primitive keeps
    the path it was first indexed under)."""
    with _JAX_PRIMS_LOCK:
        new = sorted(
            (n, m)
            for n, m in list(sys.modules.items())
            if m is not None and n not in _JAX_PRIMS_SEEN and _jax_module(n)
        )
        found: dict[int, tuple[Any, str]] = {}
        for n, m in new:
            _JAX_PRIMS_SEEN.add(n)
            try:
                items = sorted((k, v) for k, v in vars(m).items() if type(k) is str)
            except TypeError:
                continue
            for k, v in items:
                if isinstance(v, _compat.Primitive) and id(v) not in _JAX_PRIMS:
                    path = f"{n}:{k}"
                    got = found.get(id(v))
                    if got is None or path < got[1]:
                        found[id(v)] = (v, path)  # kept alive: ids never reused
        _JAX_PRIMS.update(found)


def _jax_primitive_name(p: Any) -> str | None:
    """Where JAX defines ``p`` (``module:attribute``) if it is a module-level
    primitive of JAX's; None otherwise."""
    got = _JAX_PRIMS.get(id(p))
    if got is None or got[0] is not p:
        _scan_jax_primitives()
        got = _JAX_PRIMS.get(id(p))
        if got is None or got[0] is not p:
            return None
    return got[1]


jax_primitive_name = _jax_primitive_name


_LOGGED_PRIMS: set[str] = set()


def _enc_primitive(p: Any, ctx: _Ctx) -> str:
    path = _jax_primitive_name(p)
    if path is not None:
        return f"prim:jax:{_enc_str(path)}:{_enc_str(p.name)}"
    # Not one of JAX's by identity: the lowered module completes the key.
    ctx.relower = True
    pname = p.name if isinstance(p.name, str) else repr(type(p.name))
    if pname not in _LOGGED_PRIMS and len(_LOGGED_PRIMS) < 1000:
        _LOGGED_PRIMS.add(pname)
        logger.debug(
            "pcache: primitive %r in a param is not one of JAX's own (by identity): "
            "programs holding it are keyed by their lowered module too",
            pname,
        )
    return f"prim:other:{_qual(type(p))}:{_enc_str(pname)}"


def _enc_tolerance(x: Any, ctx: _Ctx) -> str:
    ctx.volatile = True
    return f"Tolerance({_enc(x.atol, ctx)},{_enc(x.rtol, ctx)},{_enc(x.ulps, ctx)})"


def _enc_tuple(x: tuple, ctx: _Ctx) -> str:
    # Fast path: tuples of exact ints (shapes, axes, permutations) are most params.
    try:
        if all(type(v) is int for v in x):
            return "(" + ",".join([f"i{v}" for v in x]) + ")"
    except TypeError:
        pass
    return "(" + ",".join([_enc(v, ctx) for v in x]) + ")"


def _enc_list(x: list, ctx: _Ctx) -> str:
    ctx.volatile = True
    return "[" + _enc_seq(x, ctx) + "]"


def _enc_dict(x: dict, ctx: _Ctx) -> str:
    ctx.volatile = True
    items = sorted((_enc(k, ctx), _enc(v, ctx)) for k, v in x.items())
    return "{" + ",".join(f"{k}:{v}" for k, v in items) + "}"


def _enc_set(x: Any, ctx: _Ctx) -> str:
    if type(x) is not frozenset:
        ctx.volatile = True
    return "fs{" + ",".join(sorted(_enc(v, ctx) for v in x)) + "}"


_EXACT: dict[type, Callable[[Any, _Ctx], str]] = {
    type(None): lambda x, c: "N",
    bool: lambda x, c: "T" if x else "F",
    int: lambda x, c: f"i{x}",
    float: lambda x, c: _enc_float(x),
    complex: lambda x, c: "c" + struct.pack("<dd", x.real, x.imag).hex(),
    str: lambda x, c: _enc_str(x),
    bytes: lambda x, c: "y" + x.hex(),
    # Immutable, by value (scatter dimension numbers built with range(...)).
    range: lambda x, c: f"range({x.start},{x.stop},{x.step})",
    # lax's accuracy request for unary functions, read by their lowering (a plain
    # class whose attributes can be reassigned: by value, and never memoized).
    _compat.Tolerance: lambda x, c: _enc_tolerance(x, c),
    tuple: _enc_tuple,
    list: _enc_list,
    dict: _enc_dict,
    frozenset: _enc_set,
    set: _enc_set,
    _compat.ShapedArray: _enc_aval,
    _compat.AbstractToken: _enc_aval,
    _compat.AbstractRef: _enc_slots,  # inner aval, memory space, kind (Pallas refs)
    _compat.Mesh: _enc_mesh,
    _compat.AbstractMesh: _enc_abstract_mesh,
    _compat.UnspecifiedValue: lambda x, c: "UNSPECIFIED",
    _compat.AutoLayoutSingleton: lambda x, c: "AUTO_LAYOUT",
    _compat.Layout: lambda x, c: (
        f"Layout({_enc(x.major_to_minor, c)};{_enc(x.tiling, c)};"
        f"{_enc(x.sub_byte_element_size_in_bits, c)})"
    ),
    _compat.Format: lambda x, c: f"Format({_enc(x.layout, c)};{_enc(x.sharding, c)})",
    _compat.SingleDeviceSharding: lambda x, c: (
        f"SDS({_enc_device(next(iter(x.device_set)))};mk={_enc(x.memory_kind, c)})"
    ),
    _compat.GSPMDSharding: lambda x, c: (
        f"GSPMD(({','.join(_enc_device(d) for d in _compat.gspmd_sharding_devices(x))});"
        f"{_compat.gspmd_sharding_proto(x).hex()};mk={_enc(x.memory_kind, c)})"
    ),
    _compat.Device: lambda x, c: _enc_device(x),
    _compat.JaxprEqnContext: lambda x, c: _enc_eqn_ctx(x, c),
    _compat.ManualAxisType: _enc_slots,
    _compat.AxisEnv: _enc_slots,
    _compat.PyTreeDef: _enc_treedef,
    _compat.FlatCallback: lambda x, c: (
        f"FlatCallback({_enc_callable(x.callback_func, c)};{_enc_treedef(x.in_tree, c)})"
    ),
}


def _enc_eqn_ctx(x: Any, ctx: _Ctx) -> str:
    e = _CTX_MEMO.get(x)
    if e is None:
        # All slots: compute_type, threefry_partitionable, cur_abstract_mesh,
        # remove_size_one_mesh_axis, xla_metadata (+ any future ones). Lowering
        # re-enters this context per equation (JaxprEqnContextManager).
        e = "ctx" + _enc_slots(x, ctx)[len(_qual(type(x))) :]
        _CTX_MEMO.put(x, e)
    return e


# ----------------------------------------------------------------------------
# Per-primitive param policy

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
# Primitives whose lowering makes a host callback from their (data) params: relower.
_CALLBACK_LOWERING_PRIMS = frozenset({"debug_print", *_HOST_CALLBACK_PRIMS})

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


def _enc_policy(policy: Any, ctx: _Ctx) -> str:
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
            return _enc(policy, ctx)
        except _Unknown:
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


def _enc_params(prim: str, params: dict, ctx: _Ctx) -> str:
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
                    s = _enc(v, ctx)
            except _Unknown as e:
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


# ----------------------------------------------------------------------------
# Jaxpr walker


def _enc_effects(effs: Any, names: dict, ctx: _Ctx) -> str:
    if not effs:
        return ""
    encs = []
    for eff in effs:
        inp = getattr(eff, "input", None)
        if isinstance(inp, _Var):
            # JaxprInputEffect refers to a binder of this jaxpr: use its number.
            n = names.get(inp)
            if n is None:
                raise Uncacheable("unbound-effect-input", _qual(type(eff)))
            encs.append(f"{_qual(type(eff))}(input={n})")
            continue
        try:
            encs.append(_enc_slots(eff, ctx))
        except _Unknown as e:
            raise Uncacheable(f"unknown-effect:{_qual(type(eff))}:{e.qualname}") from None
    return "!{" + ",".join(sorted(encs)) + "}"


def _enc_literal(lit: Any, ctx: _Ctx) -> str:
    val = lit.val
    aval_e = _enc_aval(lit.aval, ctx)
    # Every literal is keyed by its content, even one that lowering hoists into an
    # executable argument (jax_use_simplified_jaxpr_constants): over-keying is safe.
    t = type(val)
    if t is bool or t is int or t is float or t is complex:
        v = _EXACT[t](val, ctx)
    else:
        try:
            v = _enc(val, ctx)
        except _Unknown as e:
            raise Uncacheable(f"unknown-literal:{e.qualname}") from None
    return f"lit({v}):{aval_e}"


def _jaxpr_lines(jaxpr: Any, consts: Any, ctx: _Ctx) -> list[str]:
    """The canonical lines of one jaxpr (its own variable numbering)."""
    names: dict[Any, str] = {}
    counter = itertools.count()
    lines: list[str] = []

    # inlined _IdMemo.get: this is the hot loop
    ctx_d, aval_d = (_CTX_MEMO._d, _AVAL_MEMO._d) if memos_on() else ({}, {})

    def bind(v: Any) -> str:
        aval = v.aval
        e = aval_d.get(id(aval))
        aenc = e[1] if e is not None and e[0]() is aval else _enc_aval(aval, ctx)
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
    rule_keys, rules = ctx.rule_keys, ctx.rules
    for eqn in jaxpr.eqns:
        p = eqn.primitive
        rk = rule_keys.get(p)
        if rk is None:
            rk = rule_keys[p] = lowering_rule_key(p)
        if p not in rules:
            rules[p] = rk.entries
        if not rk.persistent:
            # The lowering is user code the key cannot see: memory tier only, and the
            # key names the rule itself (rk.token is unique to those rule objects).
            ctx.persistent = False
            ctx.local_why = ctx.local_why or f"user-lowering-rule:{p.name}"
        prim = p.name
        if rk.traced or not rk.persistent or prim in _CALLBACK_LOWERING_PRIMS:
            # Host callbacks (this call's functions), or a rule whose code lowers to
            # whatever it does now (`mlir.lower_fun` over user code, any user rule:
            # it may read a global): the module completes the key
            # (JaxprDigest.relower), so a hit is always what lowering gives now.
            ctx.relower = True
        ins = " ".join([use(a) for a in eqn.invars])
        params = _enc_params(prim, eqn.params, ctx) if eqn.params else ""
        outs = " ".join([bind(v) for v in eqn.outvars])
        ectx = eqn.ctx
        e = ctx_d.get(id(ectx))
        cenc = e[1] if e is not None and e[0]() is ectx else _enc_eqn_ctx(ectx, ctx)
        # The primitive's name and its lowering rule: two rules for one name, or a rule
        # registered again, are other programs.
        line = f"{outs} = {_enc_str(prim)}<{rk.token}>[{params}] {ins} @{cenc}"
        if eqn.effects:
            line += _enc_effects(eqn.effects, names, ctx)
        lines.append(line)
    lines.append("out " + " ".join(use(a) for a in jaxpr.outvars))
    if jaxpr.effects:
        lines.append("effects " + _enc_effects(jaxpr.effects, names, ctx))
    return lines


def _enc_const(c: Any, ctx: _Ctx) -> str:
    try:
        return _enc(c, ctx)
    except _Unknown as e:
        raise Uncacheable(f"unknown-const:{e.qualname}") from None


def _sub_jaxpr(obj: Any, ctx: _Ctx) -> str:
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


def _digest_jaxpr(obj: Any, jaxpr: Any, consts: Any, ctx: _Ctx) -> str:
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
        memo = _JAXPR_MEMO.get(obj)
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
            if not volatile:
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


def jaxpr_fingerprint(closed_jaxpr: Any) -> JaxprDigest:
    """Digest of the canonical form of ``closed_jaxpr``, and whether it may be persisted.

    Every literal is keyed by its content (also those lowering hoists into
    executable arguments), which is always safe.
    """
    jaxpr, consts = _as_jaxpr(closed_jaxpr)
    ctx = _Ctx()
    try:
        hexd = _digest_jaxpr(closed_jaxpr, jaxpr, consts, ctx)
    except _Unknown as e:  # e.g. an aval of an extended dtype the encoder does not know
        raise Uncacheable(f"unknown-value:{e.qualname}") from None
    d = hashlib.sha256(f"{CANON_VERSION}\n{hexd}".encode()).digest()
    return JaxprDigest(d, ctx.persistent, "" if ctx.persistent else ctx.local_why, ctx.relower)


def jaxpr_arrays(closed_jaxpr: Any) -> tuple | None:
    """The user numpy buffers ``closed_jaxpr`` holds (its constants and literals, in
    every sub-jaxpr), each with a snapshot of its content now: ((array, snapshot),
    ...), checked by `same_contents`. None where the walk met a mutable container,
    whose content cannot be snapshotted this way. Raises `Uncacheable` like
    `jaxpr_fingerprint` (whose memo it shares)."""
    jaxpr, consts = _as_jaxpr(closed_jaxpr)
    ctx = _Ctx()
    try:
        _digest_jaxpr(closed_jaxpr, jaxpr, consts, ctx)
    except _Unknown as e:
        raise Uncacheable(f"unknown-value:{e.qualname}") from None
    return None if ctx.volatile else tuple(ctx.arrays)


_LATE_MEMO = _memos.memo("canon.late", _IdMemo())


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
    for eqn in jaxpr.eqns:
        if eqn.primitive.name in _CALLBACK_LOWERING_PRIMS:
            callbacks = True
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


def same_contents(arrays: tuple) -> bool:
    """Whether every array of `jaxpr_arrays` still holds its snapshot's content."""
    return all(_same_content(a, snapshot) for a, snapshot in arrays)


def jaxpr_digest(closed_jaxpr: Any) -> bytes:
    """32-byte digest of the canonical form (see ``jaxpr_fingerprint``).

    Callers that persist must use ``jaxpr_fingerprint`` to learn whether they may.
    """
    return jaxpr_fingerprint(closed_jaxpr).digest


def canonical_text(closed_jaxpr: Any) -> str:
    """The canonical form as text: equal texts <=> equal digests."""
    jaxpr, consts = _as_jaxpr(closed_jaxpr)
    ctx = _Ctx(text=True)
    try:
        return "\n".join(_jaxpr_lines(jaxpr, consts, ctx)) + "\n"
    except _Unknown as e:
        raise Uncacheable(f"unknown-value:{e.qualname}") from None


# ----------------------------------------------------------------------------
# Public value encoding


def canonicalize(obj: Any, sink: Any = None, *, allow_local: bool = False) -> str:
    """Canonical text encoding of a value (shardings, layouts, devices, options...).

    If ``sink`` is given, the encoding is also passed to ``sink.update`` (a hashlib
    object) as UTF-8. Raises Uncacheable for a type without a canonical form, and for
    process-local objects (functions) unless ``allow_local``.
    """
    ctx = _Ctx()
    ctx.allow_local = allow_local
    try:
        s = _enc(obj, ctx)
    except _Unknown as e:
        raise Uncacheable(f"unknown-value:{e.qualname}") from None
    if not ctx.persistent and not allow_local:
        raise Uncacheable("process-local-value", _qual(type(obj)))
    if ctx.relower:  # a value only a lowered module could complete (a user primitive)
        raise Uncacheable("module-keyed-value", _qual(type(obj)))
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
    ctx = _Ctx()
    try:
        s = _enc(value, ctx)
    except _Unknown as e:
        raise Uncacheable(f"env-config:{name}:{e.qualname}") from None
    if not ctx.persistent or ctx.relower:
        raise Uncacheable(f"env-config:{name}:process-local")
    return s


# ----------------------------------------------------------------------------
# Lowering rules: how a primitive lowers, as far as a key can tell


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
    #: ``((fun, multiple_results), ...)``: rules made by `mlir.lower_fun` over
    #: functions outside JAX (equinox's unvmap_any, ...). Such a rule lowers what
    #: tracing ``fun`` gives at lowering time: a program using it is
    #: `JaxprDigest.relower` (keyed by its lowered module too).
    traced: tuple = ()


# Primitive -> RuleKey, revalidated by entry identity on each use
_RULE_KEYS: dict = _memos.memo("canon.rule_keys", {})


_JAX_MODULES = ("jax.", "jaxlib.")


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
    entries = _compat.lowering_entries(prim)
    if memos_on():
        got = _RULE_KEYS.get(prim)
        if (
            got is not None
            and len(got.entries) == len(entries)  # a platform may have been added
            and all(a is b for a, b in zip(got.entries, entries, strict=True))
        ):
            return got
    platforms = _compat.lowering_platform_names()
    present = [(p, e) for p, e in zip(platforms, entries, strict=True) if e is not None]
    described = [_describe_rule(e.rule, 0) for _, e in present]
    traced = []
    for i, (_, e) in enumerate(present):
        parts = _compat.lower_fun_parts(e.rule) if described[i] is None else None
        if parts is not None:
            described[i] = f"lower_fun(multiple_results={parts[1]})#{len(traced)}"
            traced.append(parts)
    if None in described:
        # Named by the rule functions' identity (a token never reused in this process).
        token = ";".join(
            f"{p}:{local_token(e.rule)}:{bool(getattr(e, 'inline', False))}" for p, e in present
        )
        key = RuleKey(entries, False, hashlib.sha256(token.encode()).hexdigest()[:32])
    else:
        parts = [
            f"{p}:{d}:{bool(getattr(e, 'inline', False))}"
            for (p, e), d in zip(present, described, strict=True)
        ]
        key = RuleKey(
            entries, True, hashlib.sha256(";".join(parts).encode()).hexdigest()[:32], tuple(traced)
        )
    if memos_on():
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
    if isinstance(obj, _compat.Primitive):
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


# ----------------------------------------------------------------------------
# A bounded memo for the key's other parts (pcache._key, pcache._jit_seam)


class BoundedMemo:
    """A small thread-safe LRU dict (the key memo must not grow without bound).

    Keyed by value (``__eq__``/``__hash__``), never by identity."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._d: collections.OrderedDict = collections.OrderedDict()
        self._lock = threading.Lock()

    def get(self, key):
        if not memos_on():
            return None
        with self._lock:
            value = self._d.get(key)
            if value is not None:
                self._d.move_to_end(key)
            return value

    def put(self, key, value) -> None:
        if not memos_on():
            return
        with self._lock:
            self._d[key] = value
            while len(self._d) > self._size:
                self._d.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._d.clear()

    def __len__(self) -> int:
        return len(self._d)
