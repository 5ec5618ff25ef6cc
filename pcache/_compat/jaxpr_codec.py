"""Closed jaxprs as data, and back (issue 27, phase 1: `docs/design-trace-persist.md`,
sections 2 and 5): the third module of `pcache._compat`, for JAX 0.10.

`encode` turns a `ClosedJaxpr` into JSON values (``None``, ``bool``, ``int``,
``str``, lists of them, dicts with string keys) and `decode` rebuilds it with JAX's
own constructors. It fails closed: every type it meets must be on its table (the
types the measured programs hold, section 1 of the design), each with an exact,
lossless encoding; anything else raises `Unencodable` naming where and what, and
the trace is not persisted. Decoding runs no code chosen by the data: names
resolve only against tables built here (JAX's loaded primitives, the enums and
named tuples below, registered PRNG implementations) or to what a library module
holds under that name, checked (a library's primitive, a pytree node class, a
sentinel: `pcache._persist_key`, `pcache._out_tree`); else `Undecodable`.

Not stored: source tracebacks (locations are no part of a program), the variable
objects' identities (numbered per jaxpr), quasi-dynamic data (refused). Kept: name
stacks (a lowered module's op names), every param, the debug info's names.

Identity among sub-jaxprs is kept: a jaxpr or closed jaxpr met twice (a ``cond``
whose branches are one object, an inner jit called twice) is one object decoded.

Stand-ins (phase 4): the rules a ``custom_jvp``/``custom_vjp`` equation holds are
Python JAX calls only to transform the program, never to lower or run it: stored
as names, decoded to stand-ins that raise `StandInCalled` (`STANDIN_SLOTS`); such a
jaxpr is `Decoded.standins`, which `pcache._persist` hands only to a dispatch.
"""

from __future__ import annotations

import struct
import sys
import types
from typing import Any, NamedTuple

import jax
import numpy as np
from jax._src import callback as jax_callback
from jax._src import core, custom_derivatives, literals, source_info_util
from jax._src import linear_util as lu
from jax._src import mesh as mesh_lib
from jax._src.lax import convolution, lax, slicing
from jax._src.named_sharding import UNSPECIFIED, UnspecifiedValue
from jax._src.random import prng
from jax.sharding import SingleDeviceSharding
from jaxlib._jax import ArrayImpl
from jaxlib._jax.pytree import PyTreeDef

from pcache._compat.jaxpr_arrays import (
    Undecodable,
    Unencodable,
    b64,
    decode_array,
    decode_ctx,
    decode_debug_info,
    decode_name_stack,
    dtype_name,
    dtype_of,
    encode_array,
    encode_ctx,
    encode_debug_info,
    encode_name_stack,
    exact,
    text,
    unb64,
)
from pcache._compat.traces import checked_tree_data, out_tree_of

FORMAT = 5  # (2: closed jaxprs in a table, each object once; 3: callbacks; 4: interned;
#            5: primitives, avals, contexts and name stacks in tables)
MAX_VALUE_DEPTH = 48  # nested values in one param (the entry's JSON: 64 levels)
MAX_JAX_CONST = 256 * 1024  # bytes of one JAX array constant a trace made


def _default_device() -> Any:
    return jax.config.jax_default_device or jax.devices()[0]


class StandInCalled(RuntimeError):
    """A stored trace's custom-derivative rule was called: the trace reached a
    transformation, which `pcache._persist` never hands it to (a pcache bug)."""


def _standin(*args: Any, **kwargs: Any) -> Any:
    raise StandInCalled(
        "pcache: a custom_jvp/custom_vjp rule of a persisted trace was called; such a "
        "trace is only ever served to a top-level dispatch (please report this; "
        "JAX_PCACHE_TRACE_PERSIST=0 avoids it)"
    )


class Decoded(NamedTuple):
    closed: Any  # the `ClosedJaxpr`
    standins: bool  # whether it holds stand-ins for custom-derivative rules
    #: The library host callbacks it holds, rebuilt: (function, its content text)
    #: each (`pcache._lib_callbacks.rebuild`), what its digest names them by.
    callbacks: tuple = ()


# Enums and named tuples params hold, by a stable name (their classes never travel).
_ENUMS: dict[str, type] = {
    "lax.Precision": lax.Precision,
    "lax.RoundingMethod": lax.RoundingMethod,
    "slicing.GatherScatterMode": slicing.GatherScatterMode,
    "core.MemorySpace": core.MemorySpace,
}
_TUPLES: dict[str, type] = {
    "slicing.GatherDimensionNumbers": slicing.GatherDimensionNumbers,
    "slicing.ScatterDimensionNumbers": slicing.ScatterDimensionNumbers,
    "convolution.ConvDimensionNumbers": convolution.ConvDimensionNumbers,
}
#: (id of JAX's primitive, param) -> the kind of Python a stand-in replaces there:
#: JAX's `lu.WrappedFun` thunks ("SI"), the plain output-trees thunk ("SO").
STANDIN_SLOTS: dict[tuple[int, str], str] = {
    (id(custom_derivatives.custom_jvp_call_p), "jvp_jaxpr_fun"): "SI",
    (id(custom_derivatives.custom_vjp_call_p), "fwd_jaxpr_thunk"): "SI",
    (id(custom_derivatives.custom_vjp_call_p), "bwd"): "SI",
    (id(custom_derivatives.custom_vjp_call_p), "out_trees"): "SO",
}
#: The one param that holds a function JAX calls when the program runs: a
#: `pure_callback`'s, stored when it is a library's closure over data
#: (`pcache._lib_callbacks`; `io_callback` and `debug_callback` have effects: refused).
CALLBACK_SLOT = (id(jax_callback.pure_callback_p), "callback")
_ENUM_NAMES = {id(c): n for n, c in _ENUMS.items()}
_TUPLE_NAMES = {id(c): n for n, c in _TUPLES.items()}
_SCALARS = (bool, int, str, type(None))
_D = struct.Struct("<d")


class _Encoder:
    def __init__(self) -> None:
        self.jaxprs: list = []
        self.index: dict[int, int] = {}
        self.closed_index: dict[int, int] = {}
        self.closeds: list = []
        self.keep: list = []  # what the indexes name by id, alive while encoding
        self.standins = False
        self.callbacks = False
        self.cells: list = []  # (the callbacks' cells' values, each cell once)
        self.cell_index: dict[int, int] = {}
        # Tables the equations name by index: primitives, avals, contexts, name stacks
        # (each encoding once: a third of the entry, and the decoder makes each once).
        self.tables: dict[str, list] = {"prims": [], "avals": [], "ctxs": [], "stacks": []}
        self.table_index: dict[tuple, int] = {}  # (table, repr) -> index

    def _in(self, table: str, enc: Any) -> int:
        memo = (table, repr(enc))  # (injective over JSON values: True and 1 differ)
        k = self.table_index.get(memo)
        if k is None:
            k = self.table_index[memo] = len(self.tables[table])
            self.tables[table].append(enc)
        return k

    def aval_at(self, a: Any) -> int:
        return self._in("avals", self.aval(a))

    def jaxpr(self, j: Any) -> int:
        n = self.index.get(id(j))
        if n is not None:
            return n
        if type(j) is not core.Jaxpr or j.is_high or j.effects:
            raise Unencodable(f"jaxpr:{type(j).__qualname__}:effects={bool(j.effects)}")
        names: dict[int, int] = {}

        def bind(v: Any) -> Any:  # (a new variable: its aval's index; a dropped one)
            if v.initial_qdd is not None or v.final_qdd is not None:
                raise Unencodable("quasi-dynamic-data")
            if type(v) is core.DropVar:
                return ["_", self.aval_at(v.aval)]
            if type(v) is not core.Var or id(v) in names:
                raise Unencodable(f"binder:{type(v).__qualname__}")
            names[id(v)] = len(names)
            return self.aval_at(v.aval)

        def atom(a: Any) -> Any:  # (a variable: its number; a literal)
            if type(a) is core.Literal:
                return ["L", self.literal(a.val), self.aval_at(a.aval)]
            if id(a) not in names:
                raise Unencodable("free-variable")
            return names[id(a)]

        constvars = [bind(v) for v in j.constvars]
        invars = [bind(v) for v in j.invars]
        eqns = []
        for e in j.eqns:
            if e.effects:
                raise Unencodable(f"effects:{e.primitive.name}")
            ins = [atom(a) for a in e.invars]
            params = {k: self.param(e.primitive, k, v) for k, v in sorted(e.params.items())}
            outs = [bind(v) for v in e.outvars]
            prim = self.primitive(e.primitive)
            ctx, stack = encode_ctx(e.ctx), encode_name_stack(e.source_info.name_stack)
            eqns.append([self._in("prims", prim), ins, outs, params, self._in("ctxs", ctx),
                         self._in("stacks", stack)])  # fmt: skip
        out = {
            "constvars": constvars,
            "invars": invars,
            "eqns": eqns,
            "outvars": [atom(a) for a in j.outvars],
            "debug_info": encode_debug_info(j.debug_info),
        }
        self.keep.append(j)
        self.index[id(j)] = len(self.jaxprs)
        self.jaxprs.append(out)
        return self.index[id(j)]

    def closed(self, cj: Any) -> list:
        """A closed jaxpr by its number in ``closeds``, each object once (JAX lowers
        one function per object: the module, and an executable key made of it)."""
        k = self.closed_index.get(id(cj))
        if k is None:
            entry = [self.jaxpr(cj.jaxpr), [self.const(c) for c in cj.consts]]
            k = self.closed_index[id(cj)] = len(self.closeds)
            self.closeds.append(entry)
            self.keep.append(cj)
        return ["CJ", k]

    @staticmethod
    def primitive(p: Any) -> str:
        from pcache._canon_values import jax_primitive_name

        path = jax_primitive_name(p)
        if path is None:
            # an installed library's primitive (equinox's ``unvmap_any_p``), by the
            # name its module holds it under: its rules are that version's
            from pcache._persist_key import library_primitive_name

            path = library_primitive_name(p)
            if path is None:
                raise Unencodable(f"primitive:{p.name}")
        return path

    def aval(self, a: Any) -> list:
        if type(a) is not core.ShapedArray:
            raise Unencodable(f"aval:{type(a).__qualname__}")
        if a.manual_axis_type is not core.empty_mat:
            raise Unencodable("aval:manual-axes")
        if a.sharding != core._empty_sharding(len(a.shape)):
            raise Unencodable("aval:sharding")  # (phase 3: shardings as data)
        if any(type(d) is not int for d in a.shape):
            raise Unencodable("aval:dynamic-shape")
        return ["A", list(a.shape), dtype_name(a.dtype), bool(a.weak_type), a.memory_space.name]

    def literal(self, v: Any) -> Any:
        t = type(v)
        if t is bool:
            return v
        if t is literals.TypedInt:
            return ["TI", int(v), dtype_name(v.dtype)]
        if t is literals.TypedFloat:
            return ["TF", b64(_D.pack(float(v))), dtype_name(v.dtype)]
        if t is literals.TypedNdArray:
            return ["TA", self.array(np.asarray(v)), bool(v.weak_type)]
        if t is np.ndarray or isinstance(v, np.generic):
            return self.value(v)
        raise Unencodable(f"literal:{t.__qualname__}")

    def const(self, c: Any) -> Any:
        if type(c) is np.ndarray or isinstance(c, np.generic):
            return self.value(c)
        if type(c) is literals.TypedNdArray:
            return self.literal(c)
        if type(c) is ArrayImpl:
            return self.jax_array(c)
        raise Unencodable(f"constant:{type(c).__qualname__}")

    def jax_array(self, c: Any) -> list:
        """A JAX array a trace made (a captured one is refused by the key): by its
        values, where nothing else about it can differ from what `jax.device_put` of
        them makes: uncommitted, on the default device, not weakly typed, a numpy
        dtype (no PRNG key data), at most `MAX_JAX_CONST` bytes."""
        if c.is_deleted() or c._committed or c.aval.weak_type or c.nbytes > MAX_JAX_CONST:
            raise Unencodable("constant:ArrayImpl")
        sharding = c.sharding
        if type(sharding) is not SingleDeviceSharding or not isinstance(c.dtype, np.dtype):
            raise Unencodable("constant:ArrayImpl:sharding")
        if sharding._device != _default_device():
            raise Unencodable("constant:ArrayImpl:device")
        return ["JA", self.array(np.asarray(c))]

    array = staticmethod(encode_array)

    def param(self, prim: Any, name: str, v: Any) -> Any:
        slot = STANDIN_SLOTS.get((id(prim), name))
        if slot is not None:
            return self.standin(slot, prim, name, v)
        if (id(prim), name) == CALLBACK_SLOT:
            return self.callback(v)
        try:
            return self.value(v)
        except Unencodable as e:
            raise Unencodable(f"{prim.name}.{name}:{e.reason}") from None

    def callback(self, v: Any) -> list:
        """A `pure_callback`'s function: a library's closure over data, by what it is
        made of (`pcache._lib_callbacks.describe`), and its arguments' tree."""
        from pcache import _lib_callbacks, _out_tree

        if type(v) is not jax_callback._FlatCallback:
            raise Unencodable(f"pure_callback.callback:{type(v).__qualname__}")
        try:
            name, qual, digest, data = _lib_callbacks.describe(v)
        except (ValueError, RecursionError) as e:
            raise Unencodable(f"pure_callback.{e}") from None
        if not _out_tree.lists_fresh(v.in_tree):  # (its arguments' tree, as a param's)
            raise Unencodable("pure_callback.callback:tree-held-list")
        refs = []
        for c, d in zip(v.callback_func.__closure__ or (), data, strict=True):
            i = self.cell_index.get(id(c))
            if i is None:  # (a cell two callbacks share: one cell again when decoded)
                i = self.cell_index[id(c)] = len(self.cells)
                self.cells.append(d)  # (the cell lives while its jaxpr is encoded; held
                # by nothing of this encoder's: another callback's check counts holders)
            refs.append(i)
        tree = self.value(v.in_tree)
        self.callbacks = True
        return ["CB", [name, qual, digest, refs], tree]

    def standin(self, slot: str, prim: Any, name: str, v: Any) -> list:
        """A custom-derivative rule, by its names only (`_standin` when decoded)."""
        if slot == "SO":
            if type(v) is not types.FunctionType:
                raise Unencodable(f"{prim.name}.{name}:{type(v).__qualname__}")
            self.standins = True
            return ["SO"]
        d = getattr(v, "debug_info", None) if type(v) is lu.WrappedFun else None
        if type(d) is not lu.DebugInfo or type(d.traced_for) is not str:
            raise Unencodable(f"{prim.name}.{name}:{type(v).__qualname__}")
        if type(d.func_src_info) is not str:
            raise Unencodable(f"{prim.name}.{name}:debug-info")
        self.standins = True
        return ["SI", d.traced_for, d.func_src_info]

    def value(self, v: Any) -> Any:
        t = type(v)
        if t is str and (got := text(v)) is None:
            raise Unencodable("str:interned-unknown")
        if t in _SCALARS:
            return got if t is str else v
        if t is float:
            return ["f", b64(_D.pack(v))]
        if t is tuple:
            return ["t", *[self.value(x) for x in v]]
        if t is list:
            return ["l", *[self.value(x) for x in v]]
        if t is range:
            return ["r", v.start, v.stop, v.step]
        if isinstance(v, np.dtype):
            return ["dt", dtype_name(v)]
        if t is np.ndarray:
            return self.array(v)
        if isinstance(v, np.generic) and t.__module__ == "numpy":
            return ["ns", self.array(np.asarray(v))]
        if t is core.Jaxpr:
            return ["J", self.jaxpr(v)]
        if t is core.ClosedJaxpr:
            return self.closed(v)
        if t is core.ShapedArray:
            return self.aval(v)
        if t is UnspecifiedValue:
            return ["U"]
        if t is mesh_lib.Mesh and v == mesh_lib.empty_concrete_mesh:
            return ["M0"]
        if t is prng.PRNGImpl and prng.prngs.get(v.name) is v:
            return ["prng", v.name]
        if id(t) in _ENUM_NAMES:
            return ["E", _ENUM_NAMES[id(t)], v.name]
        if id(t) in _TUPLE_NAMES:
            return ["T", _TUPLE_NAMES[id(t)], *[self.value(x) for x in v]]
        if t is PyTreeDef:
            # (equinox's filter primitives; its classes libraries' only: no user class
            # is keyed by a param; compared read back: the digest keys it by size)
            from pcache import _out_tree
            from pcache._usercode import is_library_type as lib

            if not _out_tree.lists_fresh(v):  # (a list someone holds: review 125)
                raise Unencodable("treedef:held-list")
            try:
                return ["PT", checked_tree_data(v, _out_tree.aux_data, _out_tree.aux_of, lib)]
            except ValueError as e:
                raise Unencodable(f"treedef:{e}") from None
        raise Unencodable(t.__module__ + "." + t.__qualname__)


def encode(closed: Any) -> dict:
    """``closed`` (a `ClosedJaxpr`) as JSON values; `Unencodable` if any part has no
    encoding on the table."""
    if type(closed) is not core.ClosedJaxpr:
        raise Unencodable(f"root:{type(closed).__qualname__}")
    enc = _Encoder()
    root = enc.closed(closed)
    return {"format": FORMAT, **enc.tables, "jaxprs": enc.jaxprs, "closeds": enc.closeds,
            "root": root, "standins": enc.standins, "callbacks": enc.callbacks,
            "cells": enc.cells}  # fmt: skip


# ------------------------------------------------------------------ decoding


def at(i: Any) -> int:
    """An index into a table (read there: past its end, `IndexError`, malformed)."""
    if type(i) is not int or i < 0:
        raise Undecodable("index")
    return i


class _Decoder:
    def __init__(self, data: dict, primitives: dict) -> None:
        self.data = data
        self.prims = primitives
        self.jaxprs: list = []
        self.closeds: dict[int, Any] = {}  # (made when first met: each entry once)
        self.depth = 0
        # Immutable values met again and again (one aval per variable, a name stack
        # and context per equation), made once per entry from their encoding.
        self.avals: dict = {}
        self.standins = False
        self.callbacks: list = []
        self.cells: list = [None] * len(data["cells"])  # (made when first met)
        # (the tables, each entry made once: what the equations name by index)
        self.prim_table = [self.primitive(n) for n in data["prims"]]
        self.aval_table = [self.aval(e) for e in data["avals"]]
        self.ctx_table = [decode_ctx(e) for e in data["ctxs"]]
        self.stack_table = [source_info_util.SourceInfo(None, decode_name_stack(e))
                            for e in data["stacks"]]  # fmt: skip

    def primitive(self, name: Any) -> Any:
        p = self.prims.get(name) if type(name) is str else None
        if p is None and type(name) is str and name.startswith("lib:"):
            from pcache._persist_key import library_primitive

            p = library_primitive(name)
        if p is None:
            raise Undecodable(f"primitive:{name}")
        return p

    array = staticmethod(decode_array)

    def aval(self, e: Any) -> Any:
        tag, shape, dt, weak, space = e
        if tag != "A" or type(weak) is not bool or type(space) is not str:
            raise Undecodable("aval")
        if type(shape) is not list or any(type(d) is not int or d < 0 for d in shape):
            raise Undecodable("aval:shape")
        memo = (tuple(shape), dt, weak, space) if type(dt) is str else None
        got = self.avals.get(memo) if memo is not None else None
        if got is None:
            got = core.ShapedArray(tuple(shape), dtype_of(dt), weak,
                                   memory_space=core.MemorySpace[space])  # fmt: skip
            if memo is not None:
                self.avals[memo] = got
        return got

    def literal(self, e: Any) -> Any:
        if type(e) is bool:
            return e
        tag = e[0]
        if tag == "TI":
            return literals.TypedInt(exact(int, e[1]), dtype_of(e[2]))
        if tag == "TF":
            return literals.TypedFloat(_D.unpack(unb64(e[1]))[0], dtype_of(e[2]))
        if tag == "TA":
            a = self.array(e[1])
            aval = core.ShapedArray(a.shape, a.dtype, weak_type=exact(bool, e[2]))
            return literals.TypedNdArray(a, aval)
        return self.value(e)

    def value(self, e: Any) -> Any:
        if e is None or type(e) in (bool, int, str):
            return e
        if type(e) is not list or not e or type(e[0]) is not str:
            raise Undecodable("value")
        if self.depth > MAX_VALUE_DEPTH:
            raise Undecodable("too-deep")
        self.depth += 1
        try:
            return self._value(e)
        finally:
            self.depth -= 1

    def _value(self, e: list) -> Any:
        tag, rest = e[0], e[1:]
        if tag == "si" and len(rest) == 1 and type(rest[0]) is str:
            return sys.intern(rest[0])
        if tag == "f":
            return _D.unpack(unb64(rest[0]))[0]
        if tag == "t":
            return tuple(self.value(x) for x in rest)
        if tag == "l":
            return [self.value(x) for x in rest]
        if tag == "r":
            return range(exact(int, rest[0]), exact(int, rest[1]), exact(int, rest[2]))
        if tag == "dt":
            return dtype_of(rest[0])
        if tag == "N":
            return self.array(e)
        if tag == "ns":
            return self.array(rest[0])[()]
        if tag == "J":
            return self.ref(rest[0])
        if tag == "CJ":
            return self.closed(e)
        if tag == "A":
            return self.aval(e)
        if tag == "U":
            return UNSPECIFIED
        if tag == "M0":
            return mesh_lib.empty_concrete_mesh
        if tag == "prng":
            impl = prng.prngs.get(rest[0])
            if impl is None:
                raise Undecodable(f"prng:{rest[0]}")
            return impl
        if tag == "E":
            cls = _ENUMS.get(rest[0])
            if cls is None or rest[1] not in cls.__members__:
                raise Undecodable(f"enum:{rest[0]}")
            return cls[rest[1]]
        if tag == "T":
            cls = _TUPLES.get(rest[0])
            if cls is None or len(rest) - 1 != len(cls._fields):
                raise Undecodable(f"tuple:{rest[0]}")
            return cls(*[self.value(x) for x in rest[1:]])
        if tag == "PT" and len(rest) == 1:
            from pcache import _out_tree

            try:
                return out_tree_of(rest[0], _out_tree.aux_of)
            except ValueError as e:
                raise Undecodable(f"treedef:{e}") from None
        raise Undecodable(f"tag:{tag}")

    def ref(self, n: Any) -> Any:
        if type(n) is not int or not 0 <= n < len(self.jaxprs):
            raise Undecodable("jaxpr-ref")
        return self.jaxprs[n]

    def closed(self, e: Any) -> Any:
        tag, k = e
        if tag != "CJ" or type(k) is not int or not 0 <= k < len(self.data["closeds"]):
            raise Undecodable("closed-jaxpr")
        got = self.closeds.get(k)
        if got is None:
            n, consts = self.data["closeds"][k]
            got = self.closeds[k] = core.ClosedJaxpr(self.ref(n), [self.const(c) for c in consts])
        return got

    def const(self, e: Any) -> Any:
        if type(e) is list and e and e[0] == "TA":
            return self.literal(e)
        if type(e) is list and len(e) == 2 and e[0] == "JA":
            a = self.array(e[1])
            if type(a) is not np.ndarray or a.nbytes > MAX_JAX_CONST:
                raise Undecodable("jax-constant")
            return jax.device_put(a)  # (uncommitted, on the default device)
        return self.value(e)

    def jaxpr(self, d: Any) -> Any:
        if type(d) is not dict or set(d) != {
            "constvars",
            "invars",
            "eqns",
            "outvars",
            "debug_info",
        }:
            raise Undecodable("jaxpr")
        env: list = []
        avals = self.aval_table

        def bind(e: Any) -> Any:  # (indexes: ints, never bools or negative)
            if type(e) is int and e >= 0:
                v = core.Var(avals[e])
                env.append(v)
                return v
            if type(e) is list and len(e) == 2 and e[0] == "_":
                return core.DropVar(avals[at(e[1])])
            raise Undecodable("binder")

        def atom(e: Any) -> Any:
            if type(e) is int and e >= 0:
                return env[e]
            if type(e) is list and len(e) == 3 and e[0] == "L":
                return core.Literal(self.literal(e[1]), avals[at(e[2])])
            raise Undecodable("atom")

        constvars = [bind(e) for e in d["constvars"]]
        invars = [bind(e) for e in d["invars"]]
        eqns = []
        for prim, ins, outs, params, ctx, stack in d["eqns"]:
            p = self.prim_table[at(prim)]
            in_atoms = [atom(a) for a in ins]
            ps = {k: self.param(p, k, v) for k, v in params.items()}
            out_vars = [bind(o) for o in outs]
            eqns.append(core.new_jaxpr_eqn(in_atoms, out_vars, p, ps, core.no_effects,
                                           self.stack_table[at(stack)],
                                           self.ctx_table[at(ctx)]))  # fmt: skip
        outvars = [atom(a) for a in d["outvars"]]
        return core.Jaxpr(constvars, invars, outvars, eqns, core.no_effects,
                          decode_debug_info(d["debug_info"]))  # fmt: skip

    def param(self, prim: Any, name: str, e: Any) -> Any:
        slot = STANDIN_SLOTS.get((id(prim), name))
        if (id(prim), name) == CALLBACK_SLOT:
            return self.callback(e)
        if slot is None:
            return self.value(e)  # (a stand-in's or callback's tag is on no other table)
        if type(e) is not list or not e or e[0] != slot:
            raise Undecodable(f"stand-in:{name}")
        self.standins = True
        if slot == "SO":
            return _standin
        _, traced_for, src = e
        if type(traced_for) is not str or type(src) is not str:
            raise Undecodable("stand-in:names")
        return lu.wrap_init(_standin, debug_info=lu.DebugInfo(traced_for, src, None, None))

    def callback(self, e: Any) -> Any:
        from pcache import _lib_callbacks

        if type(e) is not list or len(e) != 3 or e[0] != "CB":
            raise Undecodable("callback")
        try:
            if type(e[1]) is list and len(e[1]) == 4 and type(e[1][3]) is list:
                for i in e[1][3]:
                    if type(i) is int and 0 <= i < len(self.cells) and self.cells[i] is None:
                        self.cells[i] = _lib_callbacks.cell(self.data["cells"][i])
            fn, text = _lib_callbacks.rebuild(e[1], self.cells)
        except ValueError as exc:
            raise Undecodable(str(exc)) from None
        tree = self.value(e[2])
        if type(tree) is not PyTreeDef:
            raise Undecodable("callback:tree")
        self.callbacks.append((fn, text))
        return jax_callback._FlatCallback(fn, tree)


def decode(data: Any, primitives: dict) -> Decoded:
    """The `ClosedJaxpr` ``data`` (from `encode`) describes, and whether it holds
    stand-ins. ``primitives``: JAX's loaded primitives by ``module:attribute``
    (`pcache._canon_values`)."""
    if (
        type(data) is not dict
        or data.get("format") != FORMAT
        or any(type(data.get(t)) is not list for t in ("prims", "avals", "ctxs", "stacks"))
        or type(data.get("jaxprs")) is not list
        or type(data.get("closeds")) is not list
        or type(data.get("standins")) is not bool
        or type(data.get("callbacks")) is not bool
        or type(data.get("cells")) is not list
    ):
        raise Undecodable("format")
    try:
        dec = _Decoder(data, primitives)
        for d in data["jaxprs"]:
            dec.jaxprs.append(dec.jaxpr(d))
        closed = dec.closed(data["root"])
        if dec.standins != data["standins"] or bool(dec.callbacks) != data["callbacks"]:
            raise Undecodable("stand-ins")
        if any(c is None for c in dec.cells):
            raise Undecodable("callback:cells")  # (a cell no callback names)
        return Decoded(closed, dec.standins, tuple(dec.callbacks))
    except (ValueError, TypeError, KeyError, IndexError, AttributeError, AssertionError,
            struct.error, RecursionError) as e:  # fmt: skip
        raise Undecodable(f"malformed:{type(e).__name__}") from None


__all__ = ["FORMAT", "Decoded", "StandInCalled", "Undecodable", "Unencodable", "decode", "encode"]
