"""The canonical encoding of values: what a jaxpr's params, literals, constants
and avals hold, and the shardings, layouts and options that go into a key.

`enc` is an injective, type-tagged text encoding that never goes through
``repr``/``str`` of an arbitrary object (those may contain memory addresses); a
type without a rule raises `Unknown` (the caller names it in an ``Uncacheable``).
A value may hold a jaxpr (a param's sub-jaxpr): `encode_sub_jaxpr`, installed by
the jaxpr walk (`pcache._canon`), encodes it. `Ctx` is the state of one walk.
"""

from __future__ import annotations

import enum
import functools
import hashlib
import json
import logging
import struct
import sys
import threading
import types
from collections.abc import Callable, Mapping
from typing import Any

import jax
import numpy as np

from pcache import _canon_rules, _compat, _introspect, _memos
from pcache._canon_memo import IdMemo, local_eq_token, local_token
from pcache._canon_rules import is_jax_module
from pcache._errors import Uncacheable
from pcache._introspect import Override, by_id, cdict, class_attr, inst_dict, is_a, items, mro

logger = logging.getLogger("pcache")

_Jaxpr = _compat.Jaxpr
_ClosedJaxpr = _compat.ClosedJaxpr
_Literal = _compat.Literal
_Var = _compat.Var

# ----------------------------------------------------------------------------
# Errors inside the encoder


class Unknown(Exception):
    """An object the encoder has no rule for; re-raised as Uncacheable with context."""

    def __init__(self, qualname: str) -> None:
        super().__init__(qualname)
        self.qualname = qualname


def qual(t: type) -> str:
    return f"{t.__module__}.{t.__qualname__}"


def _no_walk(obj: Any, ctx: Ctx) -> str:
    raise Unknown(qual(type(obj)))


#: Encodes a Jaxpr or ClosedJaxpr met as a value: set by the jaxpr walk
#: (`pcache._canon`, which imports this module: the walk encodes values, and values
#: hold jaxprs).
encode_sub_jaxpr: Callable[[Any, Ctx], str] = _no_walk

# Cross-call memos of encodings, each keyed by identity (`IdMemo`), and why that
# is sound (the jaxprs' own memo: `pcache._canon`):
#
# * AVAL_MEMO: ShapedArray -> encoding. Avals are immutable values (JAX hashes and
#   compares them by content and never mutates one).
# * CTX_MEMO: JaxprEqnContext -> encoding. Immutable records, built once per context.
# * ARRAY_MEMO: jax.Array -> content encoding. JAX arrays are immutable (JAX's array
#   contract; an array's buffer is never written after creation).

AVAL_MEMO = _memos.memo("canon.avals", IdMemo())
CTX_MEMO = _memos.memo("canon.contexts", IdMemo())
ARRAY_MEMO = _memos.memo("canon.arrays", IdMemo())

# ----------------------------------------------------------------------------
# Walk context


class Ctx:
    __slots__ = ("persistent", "local_why", "allow_local", "in_params", "text", "call_memo",
                 "depth", "arrays", "rules", "rule_keys", "volatile", "relower",
                 "lib_callbacks")  # fmt: skip

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
        # What names a library's closure over data a callback primitive holds by its
        # content (`pcache._lib_callbacks.content`): a persisted trace's digest only.
        self.lib_callbacks: Any = None


# ----------------------------------------------------------------------------
# Value encoding


def _enc_float(x: float) -> str:
    return "f" + struct.pack("<d", x).hex()


_STR_CACHE: dict[str, str] = {}  # keyed by the string's value (immutable): sound


def enc_str(x: str) -> str:
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
    raise Unknown(qual(type(dt)))


def library_prng_impl(impl: Any) -> bool:
    """Whether every function of a `PRNGImpl` is installed library code, by what it
    is (a ``__module__`` says nothing: a ``jax.tree_util.Partial`` of user code
    names JAX's: review 37); a partial only without arguments."""
    from pcache._usercode import is_library_code

    for f in impl:
        if not callable(f):
            continue
        if type(f) is functools.partial:  # (exactly: a subclass's call is its own)
            if f.args or f.keywords:
                return False
            f = f.func
        if type(f) is types.FunctionType:
            if not is_library_code(f.__globals__, f.__code__):
                return False
        elif type(f) is not types.BuiltinFunctionType:
            return False
    return True


def _enc_prng_impl(impl: Any) -> str:
    # A PRNGImpl is a NamedTuple of functions; it is identified by its registered name.
    # Only accept the impl that is registered under that name, so a user impl that
    # reuses a name can't alias a built-in one.
    if _compat.registered_prng_impls.get(impl.name) is not impl:
        raise Unknown("unregistered-prng-impl:" + qual(type(impl)))
    if not library_prng_impl(impl):
        # JAX lowers random bits through the impl's Python (``lower_fun``): only
        # JAX's own impls are named by their name; another's code is not keyed.
        raise Unknown("user-prng-impl:" + enc_str(str(impl.name)))
    return f"prng:{enc_str(impl.name)}:{enc_str(impl.tag)}:{impl.key_shape!r}"


def _array_content(a: np.ndarray) -> str:
    return _array_snapshot(a)[0]


def _array_snapshot(a: np.ndarray) -> tuple[str, tuple]:
    """The content encoding of ``a``, and a snapshot that is cheap to compare:
    (shape, dtype, the bytes or, above 64 bytes, their sha256)."""
    a = np.asarray(a)
    if a.dtype == object:
        raise Unknown("object-array")
    data = np.ascontiguousarray(a).tobytes()
    if len(data) <= 64:
        body, snap = data.hex(), data
    else:
        snap = hashlib.sha256(data).digest()
        body = "sha256:" + snap.hex()
    shape = ",".join(map(str, a.shape))
    return f"nd({_enc_dtype(a.dtype)};{shape};{body})", (a.shape, a.dtype, snap)


def same_content(a: np.ndarray, snapshot: tuple) -> bool:
    shape, dtype, snap = snapshot
    if a.shape != shape or (a.dtype is not dtype and a.dtype != dtype):  # reassignable
        return False
    data = a.tobytes()  # C order, as the snapshot
    return data == snap if len(data) <= 64 else hashlib.sha256(data).digest() == snap


def enc_jax_array(x: Any) -> str:
    if isinstance(x, jax.core.Tracer):
        raise Uncacheable("tracer-in-jaxpr", "a Tracer leaked into a jaxpr param/const")
    if x.is_deleted():  # deleted or donated: lowering it raises, as it must
        raise Uncacheable("deleted-array", "a deleted or donated array in a jaxpr")
    e = ARRAY_MEMO.get(x)
    if e is None:
        dt = x.dtype
        if isinstance(dt, np.dtype):
            e = _array_content(np.asarray(x))
        else:  # typed PRNG keys: key data + key type
            e = f"keyarr({_enc_dtype(dt)};{_array_content(np.asarray(jax.random.key_data(x)))})"
        ARRAY_MEMO.put(x, e)  # jax.Arrays are immutable
    return e


def _enc_seq(items: Any, ctx: Ctx) -> str:
    return ",".join([enc(v, ctx) for v in items])


def _enc_partition_spec(p: Any, ctx: Ctx) -> str:
    parts = []
    for e in _compat.partition_spec_entries(p):
        if e is None:
            parts.append("N")
        elif e is jax.sharding.PartitionSpec.UNCONSTRAINED:
            parts.append("UNC")
        elif isinstance(e, str):
            parts.append(enc_str(e))
        elif isinstance(e, tuple):
            parts.append("(" + _enc_seq(e, ctx) + ")")
        else:
            raise Unknown("partition-spec-entry:" + qual(type(e)))
    return (
        f"P({','.join(parts)};u={enc(frozenset(p.unreduced), ctx)};"
        f"r={enc(frozenset(p.reduced), ctx)})"
    )


def _enc_device(d: Any) -> str:
    return f"dev({enc_str(d.platform)},{int(d.id)})"


def _enc_mesh(m: Any, ctx: Ctx) -> str:
    if m.empty:
        return "Mesh()"
    ids = ",".join(str(int(d.id)) for d in m.devices.flat)
    plat = m.devices.flat[0].platform if m.devices.size else ""
    return (
        f"Mesh(names=({_enc_seq(m.axis_names, ctx)});sizes={tuple(m.axis_sizes)!r};"
        f"types=({_enc_seq(m.axis_types, ctx)});plat={enc_str(plat)};ids=({ids}))"
    )


def _enc_abstract_mesh(m: Any, ctx: Ctx) -> str:
    ad = m.abstract_device
    ad_enc = (
        "N"
        if ad is None
        else (
            f"AD({enc(ad.device_kind, ctx)},{enc(ad.num_cores, ctx)},"
            f"{enc(_compat.abstract_device_platform(ad), ctx)})"
        )
    )
    return (
        f"AMesh(names=({_enc_seq(m.axis_names, ctx)});sizes={tuple(m.axis_sizes)!r};"
        f"types=({_enc_seq(m.axis_types, ctx)});dev={ad_enc})"
    )


def _enc_named_sharding(s: Any, ctx: Ctx) -> str:
    return (
        f"NS({enc(s.mesh, ctx)};{_enc_partition_spec(s.spec, ctx)};"
        f"mk={enc(s.memory_kind, ctx)};"
        f"ids={enc(_compat.named_sharding_logical_device_ids(s), ctx)})"
    )


def _enc_shaped_array(a: Any, ctx: Ctx) -> str:
    e = AVAL_MEMO.get(a)
    if e is not None:
        return e
    shape = []
    for d in a.shape:
        if type(d) is not int:
            raise Uncacheable("dynamic-shapes", f"symbolic dimension of type {qual(type(d))}")
        shape.append(str(d))
    head = f"{_enc_dtype(a.dtype)}[{','.join(shape)}]" + ("w" if a.weak_type else "")
    extras = _aval_extras(a, ctx)
    # The common case (no sharding, no manual axes, device memory) is written as the
    # bare head; anything else as head + "{extras}". Injective: omitted means default.
    if extras != _default_extras(len(shape), ctx):
        head += "{" + extras + "}"
    parts = [head]
    e = ";".join(parts)
    AVAL_MEMO.put(a, e)
    return e


def _aval_extras(a: Any, ctx: Ctx) -> str:
    # Every slot of ShapedArray, including ones added by future JAX versions.
    return ";".join(
        f"{slot}={enc(getattr(a, slot, None), ctx)}"
        for slot in _SHAPED_ARRAY_SLOTS
        if slot not in ("shape", "dtype", "weak_type")
    )


_DEFAULT_EXTRAS: dict[int, str] = {}  # keyed by ndim (a pure function of it): sound


def _default_extras(ndim: int, ctx: Ctx) -> str:
    e = _DEFAULT_EXTRAS.get(ndim)
    if e is None:
        e = _DEFAULT_EXTRAS[ndim] = _aval_extras(_compat.ShapedArray((1,) * ndim, np.float32), ctx)
    return e


_SHAPED_ARRAY_SLOTS = tuple(s for s in _compat.ShapedArray.__slots__ if s != "__weakref__")


def enc_aval(a: Any, ctx: Ctx) -> str:
    t = type(a)
    if t is _compat.ShapedArray:
        return _enc_shaped_array(a, ctx)
    if t is _compat.AbstractToken:
        return "token"
    if t is _compat.AbstractRef:  # a mutable ref (state primitives, Pallas kernels)
        return enc_slots(a, ctx)
    raise Uncacheable("unknown-aval", qual(t))


def _own(obj: Any) -> dict:
    """``obj``'s attributes as the interpreter holds them (`pcache._introspect`)."""
    try:
        return inst_dict(obj) or {}
    except Override:
        raise Unknown(qual(type(obj))) from None


def enc_slots(obj: Any, ctx: Ctx) -> str:
    """Type name + every slot/attribute value (for small JAX records without __eq__)."""
    names: list[str] = []
    for klass in mro(type(obj)):
        own = cdict(klass).get("__slots__", ())
        for s in (own,) if type(own) is str else own:
            if s not in ("__weakref__", "__dict__") and s not in names:
                names.append(s)
    items = [(n, getattr(obj, n)) for n in names if hasattr(obj, n)]
    items += sorted(_own(obj).items())
    body = ",".join(f"{n}={enc(v, ctx)}" for n, v in items)
    return f"{qual(type(obj))}({body})"


def _enc_callable(fn: Any, ctx: Ctx) -> str:
    if not ctx.allow_local:
        raise Unknown(qual(type(fn)))
    ctx.persistent = False
    ctx.local_why = ctx.local_why or "host-callback"
    return local_token(fn)


def _enc_flat(x: Any, ctx: Ctx) -> str:
    # (a library's callback by content: handed the `_FlatCallback`, no frame here names
    # its function, which `pcache._lib_callbacks` counts the holders of)
    got = ctx.lib_callbacks(x) if ctx.lib_callbacks is not None and ctx.allow_local else None
    return got if got is not None else _enc_callable(x.callback_func, ctx)


def _enc_treedef(t: Any, ctx: Ctx) -> str:
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
        return "treedef:" + local_eq_token(t)


def _literal_buffer_is_private(a) -> bool:
    """True when no object but ``a`` can reach the memory ``a`` views, so its content
    cannot change: ``a`` is a literal array JAX made itself while tracing (a
    TypedNdArray: user code never holds one) viewing an owner array that nothing
    else refers to (a Python scalar JAX turned into an array). A view of a user's
    array is not private: the user's reference counts too (numpy points every view
    at the owner).
    """
    if type(a) is not _compat.TypedNdArray:
        return False
    base = a.base
    return (
        type(base) is np.ndarray
        and base.base is None
        # references: a.base, this local, getrefcount's argument; nothing else
        and sys.getrefcount(base) == 3
    )


def enc(obj: Any, ctx: Ctx) -> str:
    """Canonical, injective, type-tagged text encoding of a value."""
    t = type(obj)
    f = _EXACT_ID.get(id(t))
    if f is not None:
        return f(obj, ctx)
    # Subclasses and families (order matters: bool < int, NamedTuple < tuple), by the
    # real type (`pcache._introspect`: never what ``__class__`` says).
    if is_a(obj, enum.Enum):  # (its own _name_, not a ``name`` property)
        return f"E:{qual(t)}.{enc(_own(obj).get('_name_'), ctx)}"
    if is_a(obj, np.dtype):
        return _enc_dtype(obj)
    if is_a(obj, np.generic):
        return f"ns({_enc_dtype(obj.dtype)};{obj.tobytes().hex()})"
    if is_a(obj, np.ndarray):
        code, snapshot = _array_snapshot(obj)
        if not _literal_buffer_is_private(obj):
            ctx.arrays.append((obj, snapshot))  # mutable: a memo over it revalidates it
        return code
    if is_a(obj, (_Jaxpr, _ClosedJaxpr)):
        return encode_sub_jaxpr(obj, ctx)
    if is_a(obj, jax.Array):
        return enc_jax_array(obj)
    if is_a(obj, _compat.KeyTy):
        return _enc_dtype(obj)
    if is_a(obj, tuple) and class_attr(t, "_fields") is not None:
        if is_a(obj, _compat.PRNGImpl):
            return _enc_prng_impl(obj)
        return f"T:{qual(t)}(" + _enc_seq(obj, ctx) + ")"
    if is_a(obj, bool):
        return "T" if obj else "F"
    if is_a(obj, int):
        return f"i:{qual(t)}:{int(obj)}"
    if is_a(obj, float):
        return f"{qual(t)}:{_enc_float(float(obj))}"
    if is_a(obj, str):
        return f"{qual(t)}:{enc_str(str(obj))}"
    if is_a(obj, tuple):
        return f"{qual(t)}(" + _enc_seq(obj, ctx) + ")"
    if is_a(obj, jax.sharding.NamedSharding):
        return _enc_named_sharding(obj, ctx)
    if is_a(obj, jax.sharding.PartitionSpec):
        return _enc_partition_spec(obj, ctx)
    if is_a(obj, (frozenset, set)):
        if not is_a(obj, frozenset):
            ctx.volatile = True
        return "fs{" + ",".join(sorted(enc(v, ctx) for v in obj)) + "}"
    if issubclass(t, Mapping):  # (the real type, through the ABC's registry)
        ctx.volatile = True  # a mapping's content can change under the same object
        items = sorted((enc(k, ctx), enc(v, ctx)) for k, v in obj.items())
        return f"M:{qual(t)}{{" + ",".join(f"{k}:{v}" for k, v in items) + "}"
    fields = class_attr(t, "__dataclass_fields__")
    if type(fields) is dict and not is_a(obj, type):  # a dataclass (its class's own record)
        if not _introspect.dataclass_frozen(class_attr(t, "__dataclass_params__")):
            ctx.volatile = True
        # (every entry: its ClassVar and InitVar pseudo-fields too, "-" where unset)
        body = ",".join(
            f"{n}={enc(getattr(obj, n), ctx) if hasattr(obj, n) else '-'}"
            for n in fields
            if type(n) is str
        )
        return f"D:{qual(t)}({body})"
    if obj is _compat.no_axis_name:  # vmap's sentinel for "no axis name"
        return "no_axis_name"
    if is_a(obj, _compat.Primitive):
        return _enc_primitive(obj, ctx)
    if is_a(obj, _compat.Effect):  # debug_callback's effect param (a singleton)
        return "eff:" + enc_slots(obj, ctx)
    if is_a(obj, (_Var, _Literal)):
        raise Unknown("unbound-" + qual(t))
    if callable(obj):
        return _enc_callable(obj, ctx)
    raise Unknown(qual(t))


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
_JAX_PRIMS_SCANNED = [-1]  # len(sys.modules) at the last scan


def _scan_jax_primitives() -> None:
    """Index the Primitive objects the loaded ``jax.*``/``jaxlib.*`` modules hold
    as attributes (modules imported since the last scan only; a primitive keeps
    the path it was first indexed under)."""
    with _JAX_PRIMS_LOCK:
        count = len(sys.modules)  # (before the listing: one loaded meanwhile is new next time)
        new, pending = [], False
        for n, m in items(sys.modules):
            if m is None or n in _JAX_PRIMS_SEEN or not is_jax_module(n):
                continue
            if getattr(getattr(m, "__spec__", None), "_initializing", False):
                pending = True  # (still running its body, on another thread: next time)
                continue
            new.append((n, m))
        new.sort(key=lambda nm: nm[0])
        found: dict[int, tuple[Any, str]] = {}
        for n, m in new:
            _JAX_PRIMS_SEEN.add(n)
            try:
                attrs = sorted((k, v) for k, v in items(vars(m)) if type(k) is str)
            except TypeError:
                continue
            for k, v in attrs:
                if isinstance(v, _compat.Primitive) and id(v) not in _JAX_PRIMS:
                    path = f"{n}:{k}"
                    got = found.get(id(v))
                    if got is None or path < got[1]:
                        found[id(v)] = (v, path)  # kept alive: ids never reused
        _JAX_PRIMS.update(found)
        # (what the next call compares the count with: set after the table, under the
        # lock, to the count the listing started from; review 137: another thread's
        # import during a scan, counted as scanned, left its primitives unnamed)
        _JAX_PRIMS_SCANNED[0] = -1 if pending else count


def jax_primitive_name(p: Any) -> str | None:
    """Where JAX defines ``p`` (``module:attribute``) if it is a module-level
    primitive of JAX's; None otherwise."""
    got = _JAX_PRIMS.get(id(p))
    if got is None or got[0] is not p:
        n = len(sys.modules)
        if _JAX_PRIMS_SCANNED[0] == n:
            # nothing imported since the last scan: a user's or another library's
            # primitive, asked for on every key (a module swapped for another at
            # the same count goes unscanned: its primitives are then keyed as a
            # user's, by name, type and the lowered module: misses, never hits)
            return None
        _scan_jax_primitives()
        got = _JAX_PRIMS.get(id(p))
        if got is None or got[0] is not p:
            return None
    return got[1]


_canon_rules.JAX_PRIMITIVE[0] = jax_primitive_name


def jax_primitives_by_name() -> dict[str, Any]:
    """``module:attribute`` -> JAX's primitive there, of every loaded module (the
    table a stored jaxpr's primitives are resolved against: nothing is imported)."""
    if _JAX_PRIMS_SCANNED[0] != len(sys.modules):
        _scan_jax_primitives()
    return {path: p for p, path in list(_JAX_PRIMS.values())}


_LOGGED_PRIMS: set[str] = set()


def _enc_primitive(p: Any, ctx: Ctx) -> str:
    path = jax_primitive_name(p)
    if path is not None:
        return f"prim:jax:{enc_str(path)}:{enc_str(p.name)}"
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
    return f"prim:other:{qual(type(p))}:{enc_str(pname)}"


def _enc_tolerance(x: Any, ctx: Ctx) -> str:
    ctx.volatile = True
    return f"Tolerance({enc(x.atol, ctx)},{enc(x.rtol, ctx)},{enc(x.ulps, ctx)})"


def _enc_tuple(x: tuple, ctx: Ctx) -> str:
    # Fast path: tuples of exact ints (shapes, axes, permutations) are most params.
    try:
        if all(type(v) is int for v in x):
            return "(" + ",".join([f"i{v}" for v in x]) + ")"
    except TypeError:
        pass
    return "(" + ",".join([enc(v, ctx) for v in x]) + ")"


def _enc_list(x: list, ctx: Ctx) -> str:
    ctx.volatile = True
    return "[" + _enc_seq(x, ctx) + "]"


def _enc_dict(x: dict, ctx: Ctx) -> str:
    ctx.volatile = True
    items = sorted((enc(k, ctx), enc(v, ctx)) for k, v in x.items())
    return "{" + ",".join(f"{k}:{v}" for k, v in items) + "}"


def _enc_set(x: Any, ctx: Ctx) -> str:
    if type(x) is not frozenset:
        ctx.volatile = True
    return "fs{" + ",".join(sorted(enc(v, ctx) for v in x)) + "}"


EXACT: dict[type, Callable[[Any, Ctx], str]] = {
    type(None): lambda x, c: "N",
    bool: lambda x, c: "T" if x else "F",
    int: lambda x, c: f"i{x}",
    float: lambda x, c: _enc_float(x),
    complex: lambda x, c: "c" + struct.pack("<dd", x.real, x.imag).hex(),
    str: lambda x, c: enc_str(x),
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
    _compat.ShapedArray: enc_aval,
    _compat.AbstractToken: enc_aval,
    _compat.AbstractRef: enc_slots,  # inner aval, memory space, kind (Pallas refs)
    _compat.Mesh: _enc_mesh,
    _compat.AbstractMesh: _enc_abstract_mesh,
    _compat.UnspecifiedValue: lambda x, c: "UNSPECIFIED",
    _compat.AutoLayoutSingleton: lambda x, c: "AUTO_LAYOUT",
    _compat.Layout: lambda x, c: (
        f"Layout({enc(x.major_to_minor, c)};{enc(x.tiling, c)};"
        f"{enc(x.sub_byte_element_size_in_bits, c)})"
    ),
    _compat.Format: lambda x, c: f"Format({enc(x.layout, c)};{enc(x.sharding, c)})",
    _compat.SingleDeviceSharding: lambda x, c: (
        f"SDS({_enc_device(next(iter(x.device_set)))};mk={enc(x.memory_kind, c)})"
    ),
    _compat.GSPMDSharding: lambda x, c: (
        f"GSPMD(({','.join(_enc_device(d) for d in _compat.gspmd_sharding_devices(x))});"
        f"{_compat.gspmd_sharding_proto(x).hex()};mk={enc(x.memory_kind, c)})"
    ),
    _compat.Device: lambda x, c: _enc_device(x),
    _compat.JaxprEqnContext: lambda x, c: enc_eqn_ctx(x, c),
    _compat.ManualAxisType: enc_slots,
    _compat.AxisEnv: enc_slots,
    _compat.PyTreeDef: _enc_treedef,
    _compat.FlatCallback: lambda x, c: (
        f"FlatCallback({_enc_flat(x, c)};{_enc_treedef(x.in_tree, c)})"
    ),
}
_EXACT_ID = by_id(EXACT)  # looked up by the type's identity (`_introspect.by_id`)


def enc_eqn_ctx(x: Any, ctx: Ctx) -> str:
    e = CTX_MEMO.get(x)
    if e is None:
        # All slots: compute_type, threefry_partitionable, cur_abstract_mesh,
        # remove_size_one_mesh_axis, xla_metadata (+ any future ones). Lowering
        # re-enters this context per equation (JaxprEqnContextManager).
        e = "ctx" + enc_slots(x, ctx)[len(qual(type(x))) :]
        CTX_MEMO.put(x, e)
    return e
