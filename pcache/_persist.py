"""Persisted traces: a warm new process that does not trace (issue 27, opt-in).

With ``JAX_PCACHE_TRACE_PERSIST=1`` (``enable(trace_persist=True)``), a top-level
jit call that trace reuse keys (`pcache._trace`) and records is also written to the
store under its cross-process key (`pcache._persist_key`): the closed jaxpr as data
(`pcache._compat.jaxpr_codec`), its output tree and result paths. A later process
whose call has the same key is served that jaxpr where JAX would trace: JAX's
`_trace_for_jit` runs as for any call (donation, shardings, layouts, the input tree
and debug info from the live call) and only `pe.trace_to_jaxpr` returns the stored
jaxpr instead of running the function (`trace_to_jaxpr_wrapper`, for exactly that
function object and those avals). JAX then builds its own trace-cache entry and the
jit object's fast path; the executable is found under the key it already has.

Fails closed: a call whose key cannot be written (`NoReuse` with a ``persist-``
reason) or whose jaxpr has no data encoding traces, counted in
``stats()["trace_persist_misses"]`` by reason. An entry is signed like an executable
(both HMACs checked before its JSON is parsed), bounded, decoded only against tables
(no import, no call, no pickle), and must rebuild to the digest recorded with it;
it is decoded and compared when written too, so a codec gap shows where it is
written. Check mode (``JAX_PCACHE_CHECK=1``) traces anyway and raises `CheckError`
if the stored jaxpr differs.
"""

from __future__ import annotations

import contextvars
import functools
import json
import operator
import sys
import time
import types
from typing import Any, NamedTuple

from pcache import (
    _canon,
    _compat,
    _guards,
    _memos,
    _module_watch,
    _out_tree,
    _persist_hints,
    _persist_key,
    _snapshots,
)
from pcache._errors import CheckError
from pcache._holders import library_holders
from pcache._introspect import is_a
from pcache._memos import collector_paused
from pcache._usercode import NoReuse, module_dict

TRACE_FORMAT = 6  # (2: library rules digested; 3: interned strings, shared objects; 4: key
# tables; 5: a tree's classes stamped, `_class_shape.stamp`; 6: module reads)
HEAD = b"pcache-trace 1\n"
#: Bounds of an entry: its bytes, and its JSON's nesting.
MAX_RAW = 16 * 1024 * 1024
_LOAD = {"kind": "trace", "trace_format": TRACE_FORMAT}
_FIELDS = frozenset(
    {"trace_format", "key", "function_name", "trace_seconds", "jaxpr_digest", "out_tree",
     "result_paths", "jaxpr", "library_rules", "module_reads"}
)  # fmt: skip
_MISSING = object()
_RULES: dict = _memos.memo("persist.library_rules", {})  # name -> (rules, digest)

# The serve JAX's next trace of one function object takes instead of tracing.
_SERVE: contextvars.ContextVar = contextvars.ContextVar("pcache_trace_serve", default=None)


class Served(NamedTuple):
    closed: Any  # the decoded ClosedJaxpr
    out_tree: Any
    result_paths: tuple
    digest: str
    #: It holds stand-ins for custom-derivative rules (`jaxpr_codec.STANDIN_SLOTS`):
    #: served only to a top-level dispatch, never kept where a transformation or
    #: ``.trace()`` could find it (neither JAX's trace-cache entry nor the memo).
    standins: bool = False
    #: The library primitives' rules as the storing process had them (`library_rules`).
    library_rules: tuple = ()
    #: It holds a library's host callbacks, rebuilt (`pcache._lib_callbacks`): its
    #: digest keys them by content.
    callbacks: bool = False
    #: What the program's code read from library modules while the storing process
    #: traced it, beyond what the key guards: ((module, name), ...), and the digest of
    #: what they held (`_persist_key.module_reads`), compared before it is served.
    module_reads: tuple = ()
    reads_digest: str = ""


class Bad(Exception):
    """An entry that is not a trace pcache wrote, or does not rebuild to its digest."""


def _miss(rt, reason: str) -> None:
    rt.stats.count("trace_persist_misses", 0, reason)


def infer_params_frame() -> Any:
    """The `_infer_params` frame of the call being keyed (`_compat.traces`)."""
    from pcache._compat import traces

    return traces.infer_params_frame()


class Looked(NamedTuple):
    """What `lookup` found: the call's persisted key (None: not persistable), the
    stored trace (None: none to serve), and the walks that made the key."""

    key: str | None
    served: Served | None
    walks: tuple = ()


def lookup(rt, fun, jit_info, signature, in_avals, ctx_mesh, frame: Any = None) -> Looked:
    """The call's persisted key and its stored trace. ``frame``: the call's
    `_infer_params` frame (None: nothing is served), whose caller tells JAX's
    top-level dispatch, the one use a trace holding stand-ins is served to
    (`traces.dispatching`)."""
    if not _compat.trace_state_clean() or frame is None:
        return Looked(None, None)  # (inside another trace: not a candidate)
    # (the key's tuples and the parsed entry are garbage when it ends: `collector_paused`)
    with collector_paused():
        return _lookup(rt, fun, jit_info, signature, in_avals, ctx_mesh, frame)


def _lookup(rt, fun, jit_info, signature, in_avals, ctx_mesh, frame: Any) -> Looked:
    from pcache._compat import traces

    try:
        ignore = rt.settings.trace_persist_env_ignore
        key, _, walks = _persist_key.trace_key(fun, jit_info, signature, in_avals, ctx_mesh, ignore)
    except NoReuse as e:
        _miss(rt, e.reason)
        return Looked(None, None)
    except RecursionError:
        _miss(rt, "persist-too-deep")
        return Looked(None, None)
    got = rt.local.read(key, lambda raw, _replay: _decoded(raw, key))
    if got is not None and got[0] is _STALE:
        _miss(rt, "library-names-changed")  # (traced; not stored over it: review 122)
        return Looked(None, None)
    if got is None:
        _miss(rt, "absent")
        # (a stored trace is made afresh from what the key describes, never of a
        # trace JAX cached by identity: an inner global jit, whose function an
        # in-process key does not walk, review 60; `_recording.Recorder`)
        return Looked(key, None, walks)
    if got[0].standins and not traces.dispatching(frame):
        _miss(rt, "dispatch-only")  # (`.trace()`, `.lower()`: traced, not stored again)
        return Looked(None, None)
    if got[0].library_rules and not _same_rules(got[0].library_rules):
        # (the program set a rule of a library primitive the trace binds, review 118:
        # traced, and not stored over the entry of the processes that did not)
        _miss(rt, "library-rules-changed")
        return Looked(None, None)
    if got[0].module_reads and not _same_reads(got[0]):
        _miss(rt, "module-reads-changed")  # (as rules: traced, not stored over it)
        return Looked(None, None)
    return Looked(key, got[0], walks)


#: The code a callable is built on (`_root`) for each callable trace reuse met in
#: this process, kept alive so that ids stay theirs: key -> the objects.
_ROOTS: dict = _memos.memo("persist.roots", {})
MAX_ROOTS = 4096
_ROOT_KINDS = (types.FunctionType, functools.partial, types.MethodType)


def first_sighting(fun: Any) -> bool:
    """Whether no callable built on the same code as ``fun`` came to trace reuse in
    this process before (and note that this one did).

    Only an order: the first such call is looked up by its persisted key alone
    (`pcache._trace._reuse`), and a warm new process's first call of each program
    pays no in-process key, guards nor recording; an equal callable's next call pays
    them, and is then recorded. Each order keys the call in full, so an answer wrong
    either way (two programs on the same code, an id reused) costs time, never a
    trace another program's."""
    root = _root(fun)
    key = tuple(map(id, root))
    if key in _ROOTS:
        return False
    if len(_ROOTS) >= MAX_ROOTS:
        _ROOTS.clear()
    _ROOTS[key] = root
    return True


def _root(fun: Any) -> tuple:
    """The code objects of ``fun`` and of the functions its closures and partials
    hold (a few, depth first), or its type: read from the interpreter's fields (no
    attribute lookup that could run the program's code)."""
    out: list = []
    todo = [fun]
    while todo and len(out) < 8:
        f = todo.pop()
        t = type(f)
        if t is functools.partial:
            todo.append(f.func)
        elif t is types.MethodType:
            todo.append(f.__func__)
        elif t is types.FunctionType:
            out.append(f.__code__)
            for cell in f.__closure__ or ():
                try:
                    v = cell.cell_contents
                except ValueError:  # (an empty cell)
                    continue
                if type(v) in _ROOT_KINDS:
                    todo.append(v)
        else:
            out.append(t)
    return tuple(out)


_STALE = object()  # (`_decoded`: an entry whose library names name other objects now)


def _decoded(raw: bytes, key: str) -> Any:
    from pcache._compat.jaxpr_arrays import Stale

    try:
        return decode(raw, key)
    except Stale:
        return _STALE


def _same_rules(stored: tuple) -> bool:
    try:
        return all(_rules_digest(name) == digest for name, digest in stored)
    except NoReuse:
        return False


def _read_names(reads: list) -> list:
    """[module, name] of each read `pcache._recording.read_guards` guards."""
    out = []
    for _, d, name, _ in reads:
        mod = d.get("__name__")
        if type(mod) is not str or module_dict(sys.modules.get(mod)) is not d:
            raise NoReuse("persist-module-read-unnamed")
        if not _one_module(mod):  # (another of its name alive: reviews 221, 222)
            raise NoReuse(f"persist-module-read-reimported:{mod}")
        out.append([mod, name])
    return out


def _one_module(name: str) -> bool:
    """Whether ``sys.modules[name]`` is the only module of that name: none imported
    again under it since pcache copied the first (`_snapshots.sole`), and no other
    that pcache saw, or the import system made, alive and naming itself so (a copy
    made by hand: `_module_watch.others`). A read described by the module's name is
    a read of whichever module the program reaches, which a name tells only then."""
    return _snapshots.sole(name) and not _module_watch.others(name, sys.modules.get(name))


def served_reads(served: Served) -> list | None:
    """The guards of what a stored trace's program read from library modules
    (`pcache._recording.read_guards`), of the objects those names hold now (None: a
    module not loaded): what the served trace is recorded in process with."""
    guards = []
    for mod, name in served.module_reads:
        d = module_dict(sys.modules.get(mod))
        if d is None or not _one_module(mod):  # (the program may hold another
            return None  # module of that name: reviews 221, 222)
        v = d.get(name, _MISSING)
        kind = _guards.IS if is_a(v, types.ModuleType) else _guards.LIBATTR
        guards.append((_guards.ABSENT, d, name, None) if v is _MISSING else (kind, d, name, v))
    return guards


def _same_reads(served: Served) -> bool:
    """Whether the library modules' names a stored trace read hold what they held
    when it was stored (as its key's guards of library chains describe them)."""
    guards = served_reads(served)
    try:
        return guards is not None and _persist_key.module_reads(guards) == served.reads_digest
    except NoReuse:
        return False


def candidate(rt, fun) -> bool:
    """Whether a call may be served a persisted trace or store its own: persisted
    traces on, a top-level call (no enclosing trace), and its callable not one whose
    trace was not stored before (`_persist_hints`: no key, no read). Only a candidate
    records its first trace (to store it); any other call is recorded as without
    persisted traces (a nested jit inside a new program pays no recording)."""
    if not rt.settings.trace_persist or not _compat.trace_state_clean():
        return False
    if not rt.settings.trace_persist_min_gain:
        return True
    s = _persist_hints.stub(fun)
    if s is not None and _persist_hints.skip(rt, s):
        _miss(rt, "not-stored-before")
        return False
    return True


def key_again(rt, fun, jit_info, signature, in_avals, ctx_mesh) -> str | None:
    """The call's persisted key computed again after its trace (None: no longer
    persistable): a trace that imported a module or otherwise changed what the key
    describes is not stored under the key made before it (review 58)."""
    try:
        ignore = rt.settings.trace_persist_env_ignore
        return _persist_key.trace_key(fun, jit_info, signature, in_avals, ctx_mesh, ignore)[0]
    except (NoReuse, RecursionError):
        return None


def unserve() -> None:
    """Forget a serve the call it was prepared for never took (JAX raised between
    the lookup and its trace: a later call of the same function, with other static
    arguments, would be handed it: review 50)."""
    if _SERVE.get() is not None:
        _SERVE.set(None)
        if _compat.current("trace_to_jaxpr") is _PROXY:
            _compat.patch("trace_to_jaxpr", _PROXY.orig)


def serve(fun, in_avals, served: Served, frame: Any) -> None:
    """Prepare the trace of ``fun`` at ``in_avals`` that `_trace_for_jit` makes for
    `_infer_params` frame ``frame`` (this call's, no other) to take ``served``.
    `pe.trace_to_jaxpr` is replaced only until that call (a wrapper in place for good
    would add its frames to the stack of every trace: a program that reads its stack
    while traced, ``logging``'s ``stack_info``, would see them)."""
    _SERVE.set((fun, tuple(in_avals), served, frame))
    current = _compat.current("trace_to_jaxpr")
    if current is not _PROXY:
        _PROXY.orig = current
        _compat.patch("trace_to_jaxpr", _PROXY)


def trace_to_jaxpr_wrapper(orig, caller, fun, in_avals, debug_info, *rest, **kw):
    """JAX's `pe.trace_to_jaxpr`: the stored trace for the call `serve` prepared
    (called by that call's `_trace_for_jit`, frame ``caller``, with this function
    object and these avals, a plain trace), else JAX's own."""
    from pcache._compat import traces

    pending = _SERVE.get()
    if pending is not None and pending[0] is fun and traces.is_trace_for_jit(caller, pending[3]):
        _SERVE.set(None)
        if not kw and tuple(in_avals.vals) == pending[1]:
            s: Served = pending[2]
            closed = s.closed
            closed.jaxpr._debug_info = debug_info._replace(result_paths=s.result_paths)
            out_avals = [v.aval for v in closed.jaxpr.outvars]
            return _compat.traced(closed, out_avals, s.out_tree)
    return orig(fun, in_avals, debug_info, *rest, **kw)


class _Proxy:
    """Stands at `pe.trace_to_jaxpr` for one call (then puts JAX's back); JAX's cache
    methods (``evict_weakref``, ``cache_clear``) reach the original."""

    def __init__(self) -> None:
        self.orig: Any = None

    def __call__(self, *args, **kwargs):
        orig = self.orig
        from pcache._compat import traces

        caller, pending = sys._getframe(1), _SERVE.get()
        if pending is None or not traces.is_trace_for_jit(caller, pending[3]):
            return orig(*args, **kwargs)  # (a trace run inside it: not the one prepared)
        _compat.patch("trace_to_jaxpr", orig)
        return trace_to_jaxpr_wrapper(orig, caller, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.orig, name)


_PROXY = _Proxy()


# ------------------------------------------------------------ the entry


def _reject(name: str) -> Any:
    raise Bad(f"json-constant:{name}")


def decode(raw: bytes, key: str) -> Served:
    """The trace an entry holds, checked (format, key, bounds, digest, tree)."""
    from pcache._canon_values import jax_primitives_by_name
    from pcache._compat import jaxpr_codec

    if len(raw) > MAX_RAW or not raw.startswith(HEAD):
        raise Bad("not-a-trace")
    try:
        # (nesting: bounded by the parser's recursion limit here, and in each param
        # by the decoder, `jaxpr_codec.MAX_VALUE_DEPTH`; the rest has a fixed shape)
        data = json.loads(raw[len(HEAD) :].decode("utf-8"), parse_constant=_reject)
    except (ValueError, RecursionError) as e:
        raise Bad(f"json:{type(e).__name__}") from None
    if type(data) is not dict or set(data) != _FIELDS or data["trace_format"] != TRACE_FORMAT:
        raise Bad("fields")
    if data["key"] != key:
        raise Bad("key")
    paths, digest, tree = data["result_paths"], data["jaxpr_digest"], data["out_tree"]
    if type(paths) is not list or not all(type(p) is str for p in paths):
        raise Bad("result-paths")
    if type(digest) is not str or type(tree) not in (str, list, dict):
        raise Bad("fields")
    try:
        closed, standins, callbacks = jaxpr_codec.decode(data["jaxpr"], jax_primitives_by_name())
        out_tree = _compat.out_tree_of(tree, _out_tree.aux_of)
        rebuilt = _canon.jaxpr_digest(closed, _rebuilt_named(callbacks)).hex()
    except (jaxpr_codec.Undecodable, ValueError) as e:
        raise Bad(f"decode:{e}") from None
    except RecursionError:  # (sub-jaxprs nested past the interpreter's stack: review 105)
        raise Bad("too-deep") from None
    if rebuilt != digest:
        raise Bad("digest")  # a decoder that rebuilt another program
    if out_tree.num_leaves != len(closed.jaxpr.outvars) or len(paths) != out_tree.num_leaves:
        raise Bad("out-tree")
    rules = data["library_rules"]
    if type(rules) is not list or not all(
        type(r) is list and len(r) == 2 and all(type(x) is str for x in r) for r in rules
    ):
        raise Bad("library-rules")
    rules = tuple(map(tuple, rules))
    reads = data["module_reads"]
    names = reads.get("names") if type(reads) is dict and len(reads) == 2 else None
    if (
        type(names) is not list
        or type(reads["digest"]) is not str
        or not all(
            type(r) is list and len(r) == 2 and all(type(x) is str for x in r) for r in names
        )
    ):
        raise Bad("module-reads")
    return Served(closed, out_tree, tuple(paths), digest, standins, rules, bool(callbacks),
                  tuple(map(tuple, names)), reads["digest"])  # fmt: skip


def _named_callbacks(callbacks: bool) -> Any:
    """What a digest keys a library's callbacks by (a jaxpr holding them), or None."""
    from pcache import _lib_callbacks

    return _lib_callbacks.content if callbacks else None


def _rebuilt_named(callbacks: tuple) -> Any:
    """What a decoded jaxpr's digest names its rebuilt callbacks by: the content each
    was rebuilt from (no other function is one of them: process-local, a mismatch)."""
    if not callbacks:
        return None
    texts = {id(f): (f, t) for f, t in callbacks}

    def named(flat: Any) -> str | None:
        got = texts.get(id(flat.callback_func))
        return got[1] if got is not None and got[0] is flat.callback_func else None

    return named


def library_rules(jaxpr: dict) -> list:
    """[name, digest] of every installed library's primitive a stored jaxpr binds
    (sorted by name): the digest of its entry in each of JAX's rule tables and of its
    impl and abstract eval, by content. A program that sets one of those (``ad.
    primitive_jvps[lib.p] = ...``) changes what JAX runs for the served jaxpr;
    JAX's own primitives' rules are keyed as overrides. `NoReuse` if one cannot be."""
    names = sorted({n for n in jaxpr["prims"] if n.startswith("lib:")})  # (those it binds)
    return [[n, _rules_digest(n)] for n in names]


def _rules_digest(name: str) -> str:
    prim = _persist_key.library_primitive(name)
    if prim is None:
        raise NoReuse("persist-library-primitive")
    regs = _guards.tables()[0]
    now = (prim, *[d.get(prim) for d in regs], *_compat.primitive_rules(prim))
    # (every name libraries hold it under, read now: ``name`` is the least, which may
    # be an alias the library rebinds to another primitive, review 122)
    held = tuple(sorted(set(library_holders(prim))))
    got = _RULES.get(name)
    if got is not None and len(got[0]) == len(now) and all(map(operator.is_, got[0], now)):
        return _persist_key.digest((got[1], held))  # (the same objects: library state)
    w = _persist_key.ContentWalker()
    w.registry = True  # (rules JAX made, as `_guards.registry_key` walks them)
    digest = _persist_key.digest(("library-rules", tuple(w.value(r) for r in now[1:])))
    if len(_RULES) > 256:
        _RULES.clear()
    _RULES[name] = (now, digest)
    return _persist_key.digest((digest, held))


def _refused(rt, reason: str, fun: Any = None) -> None:
    """Count a trace not stored; remember its callable (`_persist_hints`) when its
    next trace is not stored either (``fun``: the reason is the program's own)."""
    rt.stats.count("trace_persist_misses", 0, f"unstored:{reason}")
    if fun is not None and rt.settings.trace_persist_min_gain:
        _persist_hints.remember(rt, _persist_hints.stub(fun))


def not_stored(rt, fun: Any, why: str) -> None:
    """A recording trace reuse refused for a reason the callable's every trace has:
    its lookups are not worth their key."""
    if why in _PROGRAM_REASONS and rt.settings.trace_persist_min_gain:
        _persist_hints.remember(rt, _persist_hints.stub(fun))


#: `pcache._trace._record`'s reasons that are the program's, not the moment's (a
#: thread's write, a warning, a setting changed while tracing are the moment's).
_PROGRAM_REASONS = frozenset({
    "host-callback", "output-tree-objects", "user-primitive", "constants-not-snapshotted",
    "separated-consts", "high-level-jaxpr", "mutable-refs",
})  # fmt: skip
#: Its reasons that concern only what JAX runs when the trace is transformed (the
#: program's own custom-derivative rules, or rules reading its data): another
#: callable in this process must trace its own, but a stored trace holds stand-ins
#: for them and is served to a top-level dispatch only, which never runs them.
DISPATCH_ONLY = frozenset({"later-user-code", "later-reads-program-data"})
#: The reasons whose traces are stored all the same: those, an output tree whose
#: auxiliary data holds a list (`pcache._out_tree`: each serve decodes it afresh),
#: and host callbacks (stored only where each is a library's closure over data,
#: rebuilt when served: `pcache._lib_callbacks`; the codec refuses any other).
STORED = DISPATCH_ONLY | {_out_tree.MUTABLE, "host-callback"}


def record(rt, key: str, p: Any, seconds: float, key_seconds: float = 0.0, fun: Any = None,
           reads: list = (), direct: str | None = None) -> None:  # fmt: skip
    """Store the trace ``p`` (JAX's PjitParams) of a top-level call under ``key``:
    ``seconds`` tracing it took, ``key_seconds`` its content key; ``fun`` the
    callable (remembered when its trace is not stored: `_persist_hints`); ``reads``
    the guards of what the program read from library modules while traced, beyond
    the key's (`pcache._recording.read_guards`); ``direct``: the first of them the
    program's code made itself (not stored: `pcache._module_watch.watched`)."""
    from pcache._compat import jaxpr_codec
    from pcache._hlo_seam import entry_meta

    if direct is not None:  # (by a route no name describes: reviews 221-223)
        return _refused(rt, f"module-read:{direct}", fun)

    closed = p.params["jaxpr"]
    if p.consts or closed.effects:
        return _refused(rt, "consts" if p.consts else "effects", fun)
    try:
        with _out_tree.identity_scope():  # (an object in two places: `_out_tree.note`)
            jaxpr = jaxpr_codec.encode(closed)
            tree = _compat.out_tree_data(p.out_tree, _out_tree.aux_data)
    except jaxpr_codec.Unencodable as e:
        return _refused(rt, e.reason, fun)
    except ValueError as e:  # ("out-tree:<the node's class>")
        return _refused(rt, str(e)[:80], fun)
    if not _out_tree.lists_fresh(p.out_tree):
        return _refused(rt, "out-tree:held-list", fun)  # (stock hands back that very list)
    paths = closed.jaxpr.debug_info.result_paths
    if type(paths) is not tuple or not all(type(x) is str for x in paths):
        return _refused(rt, "result-paths", fun)
    # (a library's callbacks by content: encoded, each is one `_lib_callbacks` rebuilds)
    t_fp = timer()  # (what a traced call digests to find its executable: a served one not)
    fingerprint = _canon.jaxpr_fingerprint(closed, _named_callbacks(jaxpr["callbacks"]))
    saved = seconds + timer() - t_fp
    if not fingerprint.persistent:  # (its digest holds a process's token: review 120)
        return _refused(rt, f"digest:{fingerprint.why or 'process-local'}", fun)
    entry = {
        "trace_format": TRACE_FORMAT,
        "key": key,
        "function_name": str(p.params.get("name")),
        "trace_seconds": round(seconds, 6),
        "jaxpr_digest": fingerprint.digest.hex(),
        "out_tree": tree,
        "result_paths": list(paths),
        "jaxpr": jaxpr,
    }
    try:
        entry["library_rules"] = library_rules(jaxpr)
        names = _read_names(list(reads))
        entry["module_reads"] = {"names": names, "digest": _persist_key.module_reads(list(reads))}
    except NoReuse as e:
        return _refused(rt, e.reason, fun)
    raw = HEAD + json.dumps(entry, allow_nan=False, separators=(",", ":")).encode()
    # (the cost policy's decode time: not a collection it happened to meet)
    with collector_paused():
        t0 = timer()
        try:  # decoded and compared now: a lossy rule shows where it is written
            back = decode(raw, key)
        except Bad as e:
            return _refused(rt, f"roundtrip:{e}")
        finally:
            decoded = timer()
    gain = rt.settings.trace_persist_min_gain
    if gain and saved < gain * (key_seconds + decoded - t0):
        # (serving it would cost what tracing and digesting it do: a content key and
        # this decode, which digests the decoded jaxpr for its executable)
        return _refused(rt, "cheaper-to-trace", fun)
    if back.out_tree != p.out_tree or [v.aval for v in back.closed.jaxpr.outvars] != [
        v.aval for v in closed.jaxpr.outvars
    ]:
        return _refused(rt, "roundtrip:outputs")
    backend = _compat.default_backend()
    meta = entry_meta(backend, backend.local_devices()[:1], entry["function_name"])
    meta["compile_seconds"] = seconds
    meta["extra"]["load"] = dict(_LOAD)
    if rt.local.write(key, raw, meta):
        rt.stats.count("trace_persist_writes")
    return None


def check(rt, served: Served, p: Any) -> None:
    """Check mode: the stored trace must equal the fresh one."""
    fresh = _canon.jaxpr_digest(p.params["jaxpr"], _named_callbacks(served.callbacks))
    if fresh.hex() != served.digest or (served.out_tree != p.out_tree):
        raise CheckError(
            f"pcache: a persisted trace of {p.params.get('name')!r} differs from a fresh "
            "trace (a false hit): the cross-process key misses what changed"
        )


def timer() -> float:
    return time.perf_counter()


__all__ = [
    "Bad",
    "Looked",
    "Served",
    "check",
    "decode",
    "first_sighting",
    "lookup",
    "record",
    "serve",
]
