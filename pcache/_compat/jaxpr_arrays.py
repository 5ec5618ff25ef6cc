"""Arrays and dtypes as data, and back, for `pcache._compat.jaxpr_codec` (JAX 0.10),
the small records every equation holds (its context, name stack, a jaxpr's debug
info), and the codec's two refusals."""

from __future__ import annotations

import base64
import math
from typing import Any

import numpy as np
from jax._src import core, source_info_util
from jax._src import linear_util as lu
from jax._src import mesh as mesh_lib
from jax._src.random import prng

from pcache._introspect import interned


class Unencodable(Exception):
    """What stops a jaxpr from being stored (``reason``: where, and the type)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Undecodable(Exception):
    """An entry that names what is not on the decoder's tables, or is malformed."""


def exact(t: type, v: Any) -> Any:
    """``v``, where its type is exactly ``t`` (an entry's ``1`` for a ``True``, or
    ``True`` for a ``1``, is not one); else `Undecodable`."""
    if type(v) is not t:
        raise Undecodable(t.__name__)
    return v


def text(v: str) -> Any:
    """A string param: an interned one tagged so it comes back interned (a library's
    rule may test ``mode is FAST``: review 131's note); None where not readable."""
    got = interned(v)
    cached = len(v) < 2 and (not v or ord(v) < 256)  # (CPython's own: one object each)
    return None if got is None else ["si", v] if got and not cached else v


class Stale(Exception):
    """A well-formed entry whose library names name other objects now (an alias a
    library rebound, review 122): a miss, not a bad entry (another process may read
    it as it was written)."""


def b64(b: bytes) -> str:
    return base64.b64encode(b).decode("ascii")


def dtype_name(dt: Any) -> Any:
    if type(dt) is prng.KeyTy:  # a typed PRNG key's: its implementation, registered
        if prng.prngs.get(dt._impl.name) is not dt._impl:
            raise Unencodable("dtype:key-impl")
        return ["key", dt._impl.name]
    if not isinstance(dt, np.dtype):
        raise Unencodable(f"dtype:{type(dt).__qualname__}")
    got = np.dtype(dt.name) if dt.name else None
    if got is None or got != dt or type(got) is not type(dt) or got.str != dt.str:
        raise Unencodable(f"dtype:{dt!r}")  # a record, a byte order, an extended one
    return dt.name


def dtype_of(name: Any) -> Any:
    if type(name) is list and len(name) == 2 and name[0] == "key":
        impl = prng.prngs.get(name[1]) if type(name[1]) is str else None
        if impl is None:
            raise Undecodable("dtype:key-impl")
        return prng.KeyTy(impl)
    if type(name) is not str:
        raise Undecodable("dtype")
    got = _DTYPES.get(name)
    if got is not None:
        return got
    try:
        dt = np.dtype(name)
    except TypeError:
        raise Undecodable(f"dtype:{name}") from None
    # numbers only: numpy's own kinds, or ml_dtypes' (bfloat16, float8s, int4)
    plain = dt.kind in "biufc" or dt.type.__module__ == "ml_dtypes"
    if dt.name != name or not plain or dt.fields is not None or dt.subdtype is not None:
        raise Undecodable(f"dtype:{name}")
    _DTYPES[name] = dt
    return dt


def unb64(s: Any) -> bytes:
    if type(s) is not str:
        raise Undecodable("bytes")
    return base64.b64decode(s.encode("ascii"), validate=True)


# Numbers' dtypes by name (a pure function of the name: `dtype_of`'s checks made once).
_DTYPES: dict[str, Any] = {}


def encode_array(a: np.ndarray) -> list:
    if a.dtype.hasobject:
        raise Unencodable("array:object")
    shape = list(a.shape)
    zero = [i for i, st in enumerate(a.strides) if st == 0] if a.size else []
    if zero:  # (JAX lowers one with zero strides as its values broadcast: kept so)
        a = a[tuple(slice(0, 1) if i in zero else slice(None) for i in range(a.ndim))]
    raw = np.ascontiguousarray(a).tobytes()
    return ["N", dtype_name(a.dtype), shape, b64(raw), *([zero] if zero else [])]


def decode_array(e: Any) -> np.ndarray:
    tag, dt, shape, raw, *zero = e
    if tag != "N" or type(shape) is not list or any(type(d) is not int or d < 0 for d in shape):
        raise Undecodable("array")
    axes = zero[0] if len(zero) == 1 and type(zero[0]) is list else []
    if len(zero) > 1 or (zero and (not axes or axes != sorted(set(axes)))):
        raise Undecodable("array:broadcast")
    values = [1 if i in axes else d for i, d in enumerate(shape)]  # (IndexError: refused)
    dtype, b = dtype_of(dt), unb64(raw)
    if len(b) != dtype.itemsize * math.prod(values) or any(shape[i] < 1 for i in axes):
        raise Undecodable("array:size")
    a = np.frombuffer(b, dtype).reshape(values).copy()
    if not axes:
        return a
    strides = [0 if i in axes else st for i, st in enumerate(a.strides)]
    return np.lib.stride_tricks.as_strided(a, shape, strides, writeable=False)


# ------------------------------------------------------------ an equation's records


def encode_ctx(c: Any) -> list:
    if c.xla_metadata is not None or c.cur_abstract_mesh != mesh_lib.empty_abstract_mesh:
        raise Unencodable("eqn-context")  # (phase 3)
    if c.compute_type is not None and type(c.compute_type) is not str:
        raise Unencodable("eqn-context:compute_type")
    return [c.compute_type, bool(c.threefry_partitionable), bool(c.remove_size_one_mesh_axis)]


def decode_ctx(e: Any) -> Any:
    compute_type, threefry, remove = e
    if compute_type is not None and type(compute_type) is not str:
        raise Undecodable("eqn-context")
    return core.JaxprEqnContext._create(compute_type, exact(bool, threefry),
                                        mesh_lib.empty_abstract_mesh, exact(bool, remove), None)  # fmt: skip


_KINDS = {"S": source_info_util.Scope, "X": source_info_util.Transform}


def encode_name_stack(ns: Any) -> list:
    out = []
    for s in ns.stack:
        if type(s) not in (source_info_util.Scope, source_info_util.Transform):
            raise Unencodable(f"name-stack:{type(s).__qualname__}")
        if type(s.name) is not str:
            raise Unencodable("name-stack:name")
        out.append(["S" if type(s) is source_info_util.Scope else "X", s.name])
    return out


def decode_name_stack(e: Any) -> Any:
    out = []
    for kind, name in e:
        if type(kind) is not str or kind not in _KINDS or type(name) is not str:
            raise Undecodable("name-stack")
        out.append(_KINDS[kind](name))
    return source_info_util.NameStack(tuple(out))


def encode_debug_info(d: Any) -> list:
    if type(d) is not lu.DebugInfo:
        raise Unencodable(f"debug-info:{type(d).__qualname__}")
    if callable(d.result_paths):
        d = d.resolve_result_paths()
    parts = (d.arg_names, d.result_paths)
    for p in parts:
        if p is not None and (
            type(p) is not tuple or any(type(s) not in (str, type(None)) for s in p)
        ):
            raise Unencodable("debug-info:names")
    if type(d.traced_for) is not str or type(d.func_src_info) is not str:
        raise Unencodable("debug-info:names")
    return [d.traced_for, d.func_src_info, *[None if p is None else list(p) for p in parts]]


def decode_debug_info(e: Any) -> Any:
    traced_for, src, args, results = e
    if type(traced_for) is not str or type(src) is not str:
        raise Undecodable("debug-info")
    return lu.DebugInfo(traced_for, src, None if args is None else tuple(args),
                        None if results is None else tuple(results))  # fmt: skip


__all__ = [
    "Stale",
    "exact",
    "text",
    "Undecodable",
    "Unencodable",
    "b64",
    "decode_array",
    "decode_ctx",
    "decode_debug_info",
    "decode_name_stack",
    "dtype_name",
    "dtype_of",
    "encode_array",
    "encode_ctx",
    "encode_debug_info",
    "encode_name_stack",
    "unb64",
]
