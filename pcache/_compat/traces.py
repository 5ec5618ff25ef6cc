"""What trace reuse asks JAX (the second module of `pcache._compat`, re-exported
by it): where a call finds its trace, JAX's identity caches of traces, the jit
object's parts, the settings and registries tracing reads.

Imported by the package on a JAX line it supports (`JIT_SEAM`) only.
"""

from __future__ import annotations

import gc
import itertools
import operator
import sys
import threading
import types
from typing import Any

import jaxlib._jax as _jax
from jax._src import config as _config
from jax._src import core as _core
from jax._src import pjit as _pjit
from jax._src.interpreters import mlir as _mlir
from jax._src.state.types import AbstractRef
from jaxlib._jax import ArrayImpl, PjitFunction
from jaxlib._jax.pytree import PyTreeDef

from pcache import _class_shape, _dictwatch, _memos
from pcache._class_shape import stamp
from pcache._introspect import cdict as _class_dict
from pcache._introspect import inst_dict as _inst_dict
from pcache._introspect import is_a, items, names, plain_module, typed
from pcache._introspect import mro as _mro

# ------------------------------------------------------------------ trace reuse


#: A trace pcache records runs under a value of its own of this setting, which is in
#: JAX's trace context: every JAX cache keyed on a function (`weakref_lru_cache`,
#: `lu.cache`, `util.cache`: a jit's, a checkpoint's, a cond or scan body's,
#: `closure_convert`'s) misses, whatever its key holds, so the recorded trace is made
#: of the states pcache keyed, never of a trace JAX cached of another state or of an
#: equal object (reviews 20-22, 73). 0 (the default) everywhere else.
#: (Made as JAX's own options are, but not added to ``jax.config``: enabling pcache
#: changes no JAX setting, JAX's own test base class asserts so.)
RECORDING = _config.config_states.get("jax_pcache_recording") or _config.State(
    "jax_pcache_recording",
    0,
    "pcache: nonzero while a trace pcache records for reuse is made",
    include_in_trace_context=True,
)
_TOKENS = itertools.count(1)


def recording_trace() -> tuple[Any, int]:
    """(a context for one trace pcache records: a trace context no other trace had,
    its token)."""
    token = next(_TOKENS)
    return RECORDING(token), token


def recording_token() -> int:
    """This thread's recording token (0: not recording)."""
    return RECORDING.value


def recording() -> bool:
    """Whether this thread is making a trace pcache records."""
    return RECORDING.value != 0


def served_entry(params) -> Any:
    """An `InferParamsCacheEntry` of ``params`` for one call, not JAX's cached one
    (left empty: JAX asks pcache again, not keeping another callable's constants)."""
    entry = _pjit.InferParamsCacheEntry()
    entry.pjit_params = params
    return entry


def _dispatch_codes() -> tuple | None:
    """(`_infer_params`'s code, the code of the `cache_miss` a jit object calls on a
    miss of its C++ fast path), or None where JAX's are not found (never dispatching)."""
    miss = [
        c
        for c in _pjit._cpp_pjit.__code__.co_consts
        if type(c) is types.CodeType and c.co_name == "cache_miss"
    ]
    infer = getattr(getattr(_pjit, "_infer_params", None), "__code__", None)
    return (infer, miss[0]) if len(miss) == 1 and infer is not None else None


_DISPATCH_CODES = _dispatch_codes()
_TRACE_FOR_JIT = getattr(getattr(_pjit, "_trace_for_jit", None), "__code__", None)


def is_trace_for_jit(caller: Any, infer: Any) -> bool:
    """Whether frame ``caller`` is JAX's `_trace_for_jit` called by `_infer_params`
    frame ``infer``: the one caller of `pe.trace_to_jaxpr` a serve prepared in that
    call is for (a `cond` a pytree's flatten runs inside it traces the same function
    at the same avals, review 111; another call's `_trace_for_jit`, after the call
    the serve was prepared in raised inside such a flatten, review 112)."""
    return (
        _TRACE_FOR_JIT is not None
        and caller is not None
        and caller.f_code is _TRACE_FOR_JIT
        and caller.f_back is infer
    )


def infer_params_frame() -> Any:
    """The innermost `_infer_params` frame on this thread's stack (the call pcache's
    `_infer_params_cached` wrapper is in), or None."""
    codes = _DISPATCH_CODES
    f = sys._getframe(1)
    for _ in range(12):
        if f is None or codes is None:
            return None
        if f.f_code is codes[0]:
            return f
        f = f.f_back
    return None


def dispatching(frame: Any) -> bool:
    """Whether `_infer_params` frame ``frame`` was called by a jit object's dispatch
    (its `cache_miss`), not by ``.trace()``, ``.lower()`` or ``.eval_shape()``: the
    one use a trace holding stand-ins may serve (with a clean trace state, JAX runs
    it: `_run_python_pjit`, and only lowers and runs it)."""
    codes = _DISPATCH_CODES
    back = frame.f_back if frame is not None else None
    return codes is not None and back is not None and back.f_code is codes[1]


def params_jaxpr(p) -> Any:
    return p.params["jaxpr"]


def jaxpr_dispatch_ok(p) -> bool:
    """Whether `run_by_jaxpr` may run ``p``: no enclosing trace, and none of the
    options under which `_run_python_pjit` or its slow path act on each call (it
    takes ``jit_p.bind`` itself under key-reuse checks and for high-level jaxprs),
    transfer guards included."""
    c = _config
    return (
        bool(_core.trace_state_clean())
        and not p.params["jaxpr"].jaxpr.is_high
        and not any(
            o.value
            for o in (c.debug_key_reuse, c.enable_pgle, c.debug_nans, c.debug_infs)
            + (c.no_execution, c.distributed_debug)
        )
        # (a transfer guard logs in the slow path what JAX's C++ dispatch does not)
        and all(
            o.value is None
            for o in (c.transfer_guard_host_to_device, c.transfer_guard_device_to_device)
            + (c.transfer_guard_device_to_host,)
        )
    )


class _DropEntry:
    """`run_by_jaxpr`'s PGLE profiler, for `_pjit.cache_miss`: "rebuild with FDO"
    (``_need_to_rebuild_with_fdo``) makes it ask the jit object's C++ cache to drop
    the entry it made for this call, which holds no fast path: its next call takes
    the slow path again (by `_run_python_pjit`, its function seen) and builds one."""

    def is_enabled(self) -> bool:
        return True

    def is_fdo_consumed(self) -> bool:
        return False


DROP_ENTRY = _DropEntry()


def run_by_jaxpr(p, args_flat, slow) -> tuple:
    """`_run_python_pjit`'s result for ``p``, run by ``jit_p.bind`` outside any trace:
    JAX's jaxpr-keyed C++ dispatch (`_pjit_call_impl`). The arguments are checked as
    JAX checks them; an error JAX raises before running anything (an argument on the
    wrong devices, an invalid input) is raised by ``slow`` (`_run_python_pjit`), in
    its words; a deleted array argument too."""
    from jax._src import dispatch, dtypes, stages, tree_util

    for arg in args_flat:
        dispatch.check_arg(arg)
        if type(arg) is ArrayImpl and arg.is_deleted():
            return slow()
    try:
        out_flat = _pjit.jit_p.bind(*args_flat, **p.params)
    except (stages.DeviceAssignmentMismatchError, dtypes.InvalidInputException):
        return slow()
    outs = tree_util.tree_unflatten(p.out_tree, out_flat)
    return (outs, out_flat, p.out_tree, args_flat, p.params["jaxpr"], None, DROP_ENTRY, [])


def jit_parts(f) -> tuple[Any, Any] | None:
    """(the function, its PjitInfo) of a `jax.jit` object, else None: also where its
    ``_fun`` attribute is not the function its C++ object calls (deleted, or another
    assigned: review 97), among what the interpreter sees the object hold."""
    if type(f) is not PjitFunction:
        return None
    fun = getattr(f, "_fun", None)
    if fun is None or not any(x is fun for x in gc.get_referents(f)):
        return None
    return fun, f._jit_info


def jit_info_key(ji, location: bool = True) -> tuple:
    """A `PjitInfo` by value (JAX: by identity), but its signature (the caller's).
    ``location`` False: its function's name without the file and line JAX adds
    (``f at x.py:12``: debug information only; across processes code is keyed by
    content, and moved code hits)."""
    src = ji.fun_sourceinfo
    if not location and type(src) is str:
        src = src.partition(" at ")[0]
    return (src, *ji[2:])


def _jit_described(f) -> tuple | None:
    parts = jit_parts(f)
    return None if parts is None else (parts[0], jit_info_key(parts[1], location=False))


# (JAX's types a library object's description reads, by identity: `_class_shape`)
_class_shape.JAX_TYPES.update({
    ArrayImpl: ("array", None),
    PyTreeDef: ("treedef", None),
    PjitFunction: ("jit", _jit_described),
    # (nanobind's compiled functions and methods: by the path that holds each)
    type(vars(PyTreeDef)["unflatten"]): ("native", None),
    type(_jax.config.trace_context): ("native", None),
})  # fmt: skip


def trace_reuse_blocked() -> str | None:
    """A setting on under which tracing checks what a reused trace would skip."""
    for why in ("debug_key_reuse", "check_tracer_leaks", "enable_checks"):
        if getattr(_config, why).value:
            return why.replace("_", "-")
    return None


def unreusable_params(p) -> str | None:
    """Why a trace's `PjitParams` must not serve another callable, else None."""
    if p.consts:  # tracers of an enclosing trace, or refs, lifted out of the jaxpr
        return "separated-consts"
    closed = p.params["jaxpr"]
    if closed.jaxpr.is_high:
        return "high-level-jaxpr"
    if any(getattr(a, "has_qdd", False) or isinstance(a, AbstractRef) for a in p.in_avals):
        return "mutable-refs"
    return None


# ------------------------------------------------------------- trace reuse's walk


_HOLDERS: list = [None, ()]  # (the config's holder dict size, its holders)


def config_snapshot() -> tuple:
    """The value of every JAX configuration option and flag now (thread-local
    overrides included): whatever tracing reads, it reads from these."""
    vh = _config.config._value_holders
    if _HOLDERS[0] != len(vh):
        _HOLDERS[:] = [len(vh), tuple(vh.values())]
    # (by exact type: an int option set to False is not 0: review 36); the same
    # values by identity as last time have the same encoding
    raw = tuple(map(_VALUE, _HOLDERS[1]))
    prev, enc = _SNAPSHOT
    if len(raw) == len(prev) and all(map(operator.is_, raw, prev)):
        return enc
    enc = tuple([typed(v) for v in raw])
    _SNAPSHOT[:] = [raw, enc]
    return enc


_SNAPSHOT: list = [(), ()]
_VALUE = operator.attrgetter("value")

#: ``@config.default_matmul_precision("float32")``: a decorator JAX's own rules are
#: made with (``_svd_jvp_rule``), an option and a value (`pcache._rule_state`)
CONFIG_DECORATOR = getattr(_config, "StateContextManager", None)


def config_items() -> list[tuple[str, Any]]:
    """(name, value) of every JAX option and flag now, sorted by name."""
    return sorted((n, h.value) for n, h in items(_config.config._value_holders))


def default_backend() -> Any:
    from jax._src import xla_bridge

    return xla_bridge.get_backend()


def trace_state_clean() -> bool:
    """No enclosing trace: a top-level call."""
    return bool(_core.trace_state_clean())


#: Nesting bound of an output tree stored as nodes (a JSON entry nests 64 deep).
MAX_TREE_DEPTH = 40


def out_tree_data(tree: Any, aux_data: Any = None, node_ok: Any = None) -> Any:
    """An output tree as data: JAX's protobuf (hex) where every node is a tuple, list
    or None; else its nodes as JSON lists, where a node other than those and dicts
    must be a NamedTuple class named by module and qualified name that resolve back to
    it (`_named_class`), or (``aux_data``: the caller's encoder of auxiliary data,
    ValueError for what it cannot encode) a class registered as a pytree node, named
    so, with its auxiliary data; ``node_ok``: which classes may be either (None: any).
    A tree with dicts is ``{"keys": [...], "tree": nodes}``: each key object once,
    by ``aux_data``, and the dicts naming them by index, so a key decodes interned
    where it was, and one key object in two dicts as one again (the protobuf makes
    new strings: review 131). ValueError for any other tree."""
    keys: dict = {}  # id -> (index, key, its encoding)
    if not _has_dict(tree, 0):
        try:
            return tree.serialize_using_proto().hex()
        except ValueError:
            pass
    nodes = _tree_nodes(tree, 0, aux_data, node_ok, keys)
    if not keys:
        return nodes
    return {"keys": [e for _, _, e in sorted(keys.values(), key=lambda x: x[0])], "tree": nodes}


def _has_dict(t: Any, depth: int) -> bool:
    """Whether tree ``t`` holds a dict (past the depth bound: taken to, review 132)."""
    if depth > MAX_TREE_DEPTH:
        return True
    nd = t.node_data()
    if nd is None:
        return False
    return nd[0] is dict or any(_has_dict(c, depth + 1) for c in t.children())


def _tree_nodes(t: Any, depth: int, aux_data: Any, node_ok: Any, keys: dict) -> Any:
    if depth > MAX_TREE_DEPTH:
        raise ValueError("out-tree:deep")
    nd = t.node_data()
    if nd is None:
        return "*"
    typ, aux = nd
    kids = [_tree_nodes(c, depth + 1, aux_data, node_ok, keys) for c in t.children()]
    if typ is tuple or typ is list or typ is type(None):
        return [{tuple: "t", list: "l"}.get(typ, "n"), *kids]
    if typ is dict and type(aux) is list:
        if aux_data is None:
            raise ValueError("out-tree:dict-keys")
        return ["d", [_key_index(k, aux_data, keys) for k in aux], *kids]
    if node_ok is not None and not node_ok(typ):
        raise ValueError(f"out-tree:{names(typ)[1] if is_a(typ, type) else '?'}")
    if aux is None and (named := _named_class(typ)) is not None and named[-1] is not None:
        return ["N", *named, *kids]
    if aux_data is not None and (node := _node_class(typ)) is not None and node[-1] is not None:
        return ["C", *node, aux_data(aux), *kids]
    raise ValueError(f"out-tree:{names(typ)[1] if is_a(typ, type) else '?'}")


def _key_index(k: Any, aux_data: Any, keys: dict) -> int:
    """The index of dict key ``k`` in the tree's key table (encoded when first met)."""
    e = keys.get(id(k))
    if e is None:
        e = keys[id(k)] = (len(keys), k, aux_data(k))  # (``k`` held: its id stays its own)
    return e[0]


def _node_class(typ: Any, mark: bool = True) -> list | None:
    """[module, qualified name, its stamp] of a class registered as a pytree node (by
    ``register_pytree_node``: equinox's Modules), that its module holds under that
    name (its stamp: `_class_shape.stamp`, None where the name was rebound)."""
    from jax._src import tree_util

    if not is_a(typ, type) or typ not in tree_util._registry:
        return None
    module, qualname = _class_dict(typ).get("__module__"), names(typ)[1]
    if type(module) is not str or _resolve(module, qualname) is not typ:
        return None
    return [module, qualname] + ([stamp(typ, module, qualname)] if mark else [])


def _sorted_keys(e: Any, table: list) -> list:
    """The keys a stored dict node names (indexes into the tree's key table), each
    once and in JAX's (sorted) order."""
    if type(e) is not list or not all(type(i) is int and 0 <= i < len(table) for i in e):
        raise ValueError("out-tree:dict")
    keys = [table[i] for i in e]
    try:
        if keys != sorted(keys) or len(set(keys)) != len(keys):
            raise ValueError("out-tree:dict-order")
    except TypeError:
        raise ValueError("out-tree:dict-keys") from None
    return keys


def _named_class(typ: Any, mark: bool = True) -> list | None:
    """[module, qualified name, fields, its stamp] of a NamedTuple class its module
    holds under that name (its nested classes' namespaces read as the interpreter
    holds them; its stamp as `_node_class`'s)."""
    if not is_a(typ, type) or tuple not in _mro(typ):
        return None
    fields_ = _class_dict(typ).get("_fields")
    module, qualname = _class_dict(typ).get("__module__"), names(typ)[1]
    if type(fields_) is not tuple or not all(type(f) is str for f in fields_):
        return None
    if type(module) is not str or _resolve(module, qualname) is not typ:
        return None
    return [module, qualname, list(fields_)] + ([stamp(typ, module, qualname)] if mark else [])


def _resolve(module: str, qualname: str) -> Any:
    """The object at ``qualname`` in loaded module ``module`` (nothing imported, no
    attribute hook run), else None."""
    m = sys.modules.get(module)
    if not plain_module(m) or "<locals>" in qualname:
        return None
    ns: Any = _inst_dict(m)
    got = None
    for part in qualname.split("."):
        got = ns.get(part) if type(ns) in (dict, types.MappingProxyType) else None
        if got is None or not is_a(got, type):
            return None
        ns = _class_dict(got)
    return got


def checked_tree_data(v: Any, aux_data: Any, aux_of: Any, node_ok: Any) -> Any:
    """`out_tree_data` of tree definition ``v``, read back (`out_tree_of`) and
    compared now; ValueError if it cannot be, or is not ``v`` read back."""
    data = out_tree_data(v, lambda a: aux_data(a, 0, node_ok), node_ok)
    if out_tree_of(data, aux_of) != v:
        raise ValueError("lossy")
    return data


def out_tree_of(data: Any, aux_of: Any = None) -> Any:
    """The output tree `out_tree_data` made ``data`` of; ValueError if malformed or
    naming a class that is not loaded or not the NamedTuple or registered node it
    was. ``aux_of``: the decoder of what ``aux_data`` encoded."""
    from jax._src import tree_util

    if type(data) is str:
        return PyTreeDef.deserialize_using_proto(tree_util.tracing_registry, bytes.fromhex(data))
    table: list = []
    if type(data) is dict:
        if set(data) != {"keys", "tree"} or type(data["keys"]) is not list or aux_of is None:
            raise ValueError("out-tree")
        table, data = [aux_of(k) for k in data["keys"]], data["tree"]
    return _tree_from(data, tree_util, 0, aux_of, table)


def _tree_from(e: Any, tu: Any, depth: int, aux_of: Any, table: list) -> Any:
    if e == "*" and type(e) is str:
        return tu.tree_structure(0)
    if type(e) is not list or not e or depth > MAX_TREE_DEPTH:
        raise ValueError("out-tree")
    tag = e[0]
    if tag in ("t", "l", "n"):
        node, rest = ({"t": tuple, "l": list}.get(tag, type(None)), None), e[1:]
    elif tag == "d" and len(e) > 1:
        node, rest = (dict, _sorted_keys(e[1], table)), e[2:]
    elif tag == "N" and len(e) > 4 and type(e[1]) is str and type(e[2]) is str:
        cls = _resolve(e[1], e[2])
        if cls is None or type(e[3]) is not list or _named_class(cls, False) != e[1:4]:
            raise ValueError("out-tree:class")
        _stamped(cls, e[1], e[2], e[4])
        node, rest = (cls, None), e[5:]
    elif (
        tag == "C" and aux_of is not None and len(e) > 4 and type(e[1]) is str and type(e[2]) is str
    ):
        cls = _resolve(e[1], e[2])
        if cls is None or _node_class(cls, False) != e[1:3]:
            raise ValueError("out-tree:class")
        _stamped(cls, e[1], e[2], e[3])
        node, rest = (cls, aux_of(e[4])), e[5:]
    else:
        raise ValueError("out-tree")
    arity = 0 if tag == "n" else len(node[1]) if tag == "d" else len(e[3]) if tag == "N" else None
    if arity is not None and len(rest) != arity:
        raise ValueError("out-tree:arity")  # (JAX would build it: unflattening would fail)
    kids = [_tree_from(c, tu, depth + 1, aux_of, table) for c in rest]
    return PyTreeDef.from_node_data_and_children(tu.default_registry, node, kids)


def _stamped(cls: type, module: str, qualname: str, mark: Any) -> None:
    """That class as the stored tree stamped it (`_class_shape.stamp`): else the
    name holds another class now, or was rebound since its import (review 179), and
    the entry is stale."""
    from pcache._compat.jaxpr_arrays import Stale

    if type(mark) is not str:
        raise ValueError("out-tree:class")
    if stamp(cls, module, qualname) != mark:
        raise Stale("out-tree:class-stamp")


def traced(closed: Any, out_avals: list, out_tree: Any) -> tuple:
    """What `pe.trace_to_jaxpr` returns for a trace of these outputs."""
    from jax._src.tree_util import FlatTree

    return closed, FlatTree(tuple(out_avals), out_tree, False)


_FOUND: dict = {"scanned": {}, "prims": {}, "types": {}, "empty": {}, "out": ((), ())}
_MODULES = _dictwatch.Watch()  # ``sys.modules`` as `_found_tables` last scanned it
_FOUND_LOCK = threading.RLock()


def _found_tables() -> tuple[tuple, tuple]:
    """Every module-level dict of a loaded ``jax``/``jaxlib`` module keyed by
    primitives (a rule table: jet's, checkify's, sparsify's, pallas's, ...) or by
    types with callable values or tuples of them (a handler table), each module
    scanned once when first seen loaded (reviews 84, 87: a fixed list of tables
    missed some); a dict empty then (``batching.make_iota_handlers``) is told apart
    when it first holds anything (review 87's note). The same tuples while nothing
    changed."""
    with _FOUND_LOCK:
        return _found_tables_locked()


def _found_tables_locked() -> tuple[tuple, tuple]:
    changed = False
    if not _MODULES.unchanged((sys.modules,)):  # (any write: review 89 swapped one)
        scanned = _FOUND["scanned"]
        for name, m in items(sys.modules):
            if type(name) is not str or not (name == "jax" or name.startswith(_JAX)):
                continue
            if scanned.get(name) is m or not plain_module(m):
                continue
            if getattr(getattr(m, "__spec__", None), "_initializing", False):
                _MODULES.clear()  # (still running its body: scanned next time)
                continue
            scanned[name] = m
            for v in [v for _, v in items(vars(m)) if type(v) is dict]:
                _classify(v)
        changed = True
    empty = _FOUND["empty"]
    if any(map(len, empty.values())):  # (15 dicts in JAX 0.10: rule tables and caches)
        for k, v in [(k, v) for k, v in items(empty) if v]:
            del empty[k]
            _classify(v)
        changed = True
    if changed:
        _FOUND["out"] = (tuple(_FOUND["prims"].values()), tuple(_FOUND["types"].values()))
    return _FOUND["out"]


def _classify(v: dict) -> None:
    """A module-level dict as a rule table, a handler table, neither, or (empty) not
    yet known."""
    keys, values = tuple(v), tuple(v.values())
    if not keys:
        _FOUND["empty"][id(v)] = v
    elif all(isinstance(k, _core.Primitive) for k in keys):
        _FOUND["prims"][id(v)] = v
    elif all(isinstance(k, type) for k in keys) and all(map(_handler, values)):
        _FOUND["types"][id(v)] = v


_JAX = ("jax.", "jaxlib.")


def _handler(v: Any) -> bool:  # a function, or a tuple of them (aval_mapping_handlers')
    return callable(v) or (type(v) is tuple and bool(v) and all(map(callable, v)))


def _with_found(which: str, fixed: Any, found: tuple) -> tuple:
    """``fixed()`` (JAX's known tables), then the ``found`` ones not among them: the
    last tuple again while ``found`` and the platforms' lowering tables are the same
    (JAX binds its tables once, at import; the old tables stay alive in the memo, so
    their ids are not another's)."""
    # (by identity: a platform's table replaced is another table)
    n = tuple(map(id, _mlir._platform_specific_lowerings.values()))
    last = _TABLES.get(which)
    if last is not None and last[0] is found and last[1] == n:
        return last[2]
    known = fixed()
    ids = set(map(id, known))
    out = (*known, *(d for d in found if id(d) not in ids))
    _TABLES[which] = (found, n, out)
    return out


_TABLES: dict = _memos.memo("compat.tables", {})  # which -> (found, platforms, tables)


def rule_tables() -> tuple[tuple, tuple, dict]:
    """`rule_registries`, `type_handlers` and `pytree_registry` (``sys.modules`` looked
    at once)."""
    rules, types_ = _found_tables()
    return (
        _with_found("rules", _known_rule_registries, rules),
        _with_found("types", _known_type_handlers, types_),
        pytree_registry(),
    )


def rule_registries() -> tuple[dict, ...]:
    """The dicts in which JAX looks up a primitive's rules while tracing,
    transforming and lowering (a user primitive's rules are registered there): the
    known ones, then every other table of primitives JAX's loaded modules hold."""
    return _with_found("rules", _known_rule_registries, _found_tables()[0])


def _known_rule_registries() -> tuple[dict, ...]:
    from jax._src.interpreters import ad, batching, remat
    from jax._src.interpreters import partial_eval as pe
    from jax._src.state import discharge

    return (
        ad.primitive_jvps, ad.primitive_transposes, ad.primitive_linearizations,
        ad.reducing_transposes, ad.fancy_transposes, batching.fancy_primitive_batchers,
        pe.custom_partial_eval_rules, pe.partial_eval_jaxpr_custom_rules, pe.dce_rules,
        pe.const_fold_rules, pe.forwarding_rules, pe.custom_staging_rules,
        _core.custom_typechecks, _mlir._lowerings, _mlir._platform_specific_lowerings,
        *_mlir._platform_specific_lowerings.values(),
        # (review 81: the rest of those JAX 0.10 runs while tracing a call primitive,
        # a remat, a state discharge, or printing a jaxpr)
        ad.call_param_updaters, ad.call_transpose_param_updaters,
        ad.call_linearize_param_updaters, pe.call_param_updaters, pe.call_partial_eval_rules,
        remat.rules, discharge._discharge_rules, discharge._partial_discharge_rules,
        _core.pp_eqn_rules,
    )  # fmt: skip


def type_handlers() -> tuple[dict, ...]:
    """The type -> function tables JAX consults while tracing and lowering: a value's
    aval, a zero's, an MLIR type, constant or attribute (a program registers its own
    for its types: review 81); then every other table of types to functions JAX's
    loaded modules hold (batching's, dispatch's, ...: review 84)."""
    return _with_found("types", _known_type_handlers, _found_tables()[1])


def _known_type_handlers() -> tuple[dict, ...]:
    from jax._src import ad_util, dtypes
    from jax._src.interpreters import remat

    return (
        _core.pytype_aval_mappings, _core.shard_aval_handlers, _core.unshard_aval_handlers,
        ad_util.raw_jaxval_adders, ad_util.aval_zeros_likers, ad_util.aval_empty_likers,
        remat.reduce_precision_handlers, _mlir.ir_type_handlers, _mlir._constant_handlers,
        _mlir._attribute_handlers, dtypes.python_scalar_types_to_dtypes, CANONICALIZE,
    )  # fmt: skip


#: type -> handler of every registration through `dtypes.register_canonicalize_value_handler`
#: (and `jax.interpreters.xla.canonicalize_dtype_handlers`, which calls it) since
#: `watch_canonicalize_handlers`: JAX keeps them in C++, where no key reads them
CANONICALIZE: dict = {}


def watch_canonicalize_handlers() -> None:
    """Mirror canonicalize-value handlers into `CANONICALIZE` as they are registered
    (review 83: one reading a global, consulted by every ``bind``). Not seen: one
    registered before this ran, or straight through ``jaxlib``."""
    from jax._src import dtypes

    orig = dtypes.register_canonicalize_value_handler
    if getattr(orig, "__name__", "") == "_pcache_register":
        return

    def _pcache_register(type_: Any, handler: Any) -> None:
        orig(type_, handler)
        CANONICALIZE[type_] = handler

    dtypes.register_canonicalize_value_handler = _pcache_register


#: C types of JAX's own whose instances keep state no Python code reads, none of it
#: a program's code: a setting's holders (its name, default and JAX's hooks; its
#: value every key holds through the config snapshot) and the compiled functions of
#: jaxlib's nanobind extensions (extension code, as a builtin's)
NB_FUNC = type(_mlir.ir.StringAttr.get)  # (nanobind's function type)
OPAQUE_TYPES = (_config.StateContextManager, type(_config.enable_x64), NB_FUNC)


def pytree_registry() -> dict:
    """Node type -> (flatten, unflatten) of every registered pytree node type."""
    from jax._src import tree_util

    return tree_util._registry


def primitive_rules(prim) -> tuple:  # what JAX runs of ``prim``: impl, abstract eval
    return (getattr(prim, "impl", None), getattr(prim, "abstract_eval", None))
