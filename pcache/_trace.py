"""Trace reuse: a re-created callable is served the trace of the callable it equals.

JAX keys its trace cache on the function object (`pjit._infer_params_cached`, and
`trace_to_jaxpr` under it), so `jax.jit(jax.grad(f))`, a lambda, a
`functools.partial` or a nested def re-created every step is traced again on every
call, even when every later stage hits. Where a jit object's call misses JAX's C++
fast path and JAX's own trace cache, pcache keys the callable by what it is built
from, and hands JAX an equal callable's earlier trace (its `PjitParams`), which
JAX then lowers, compiles and sets up the new object's fast path from, as for any
trace-cache hit. The new call is never handed to the old callable object.

Reuse fails closed: it happens only when everything the key reaches is proven
equal, and anything unproven traces, counted by reason in ``trace_miss_reasons``.

* the callable: `pcache._walk` (an allowlist of exact encodings; user code that
  writes outside its frame or reads through reflection is never reused);
* what it reads outside itself: its globals and JAX's registries (user pytree
  nodes, user primitives' rules), `pcache._guards`;
* what JAX's trace cache keys on: the jit options (`PjitInfo`, by value), the
  argument signature (static arguments included), the avals, the context mesh and
  JAX's trace context; and the value of every JAX configuration option;
* on every reuse, revalidated: the guards, the content of any user numpy buffer
  its jaxpr holds (`_canon.jaxpr_arrays`), and that every JAX array the key names
  is alive and not deleted or donated.

A trace whose program runs Python later (host callbacks, a custom_vjp's bwd) is
never recorded. The memo (`TraceMemo`) is bounded in entries and bytes, and keeps
no JAX array alive that stock JAX would free: a trace whose callable holds one is
dropped when the last callable it served dies. The lowering-time warnings a new
trace's lowering would have issued are issued again on a reuse
(`pcache._served`).
"""

from __future__ import annotations

import logging
import threading
import types
import weakref
from typing import Any, NamedTuple

from pcache import (
    _canon,
    _compat,
    _guards,
    _hoststate,
    _late,
    _memos,
    _out_tree,
    _persist,
    _replay,
    _state,
)
from pcache._errors import CheckError, Uncacheable
from pcache._holders import indexed_whole, one_look
from pcache._recording import Recorder, left_behind, read_guards
from pcache._trace_memo import (
    ENTRY_COST,
    MEMO,
    RECORDED,
    HashedKey,
    Recorded,
    TraceMemo,
)
from pcache._user_callables import user_code
from pcache._walk import NoReuse, Walker
from pcache._walk_kinds import jit_options

logger = logging.getLogger("pcache")

#: Distinct miss reasons counted by name (then under "other").
MAX_REASONS = 256


# ------------------------------------------------------------ mutation

# Function object -> (its key, weak references to what its ids name) when a miss
# last walked it. JAX's identity-keyed trace caches (jit's, checkpoint's, the
# control-flow bodies', custom_jvp's) keep a trace of a function object for as long
# as it lives, whatever happens to its closure cells, defaults or attributes since:
# stock JAX serves that trace to every callable built on that object. A recording
# is made afresh (`_recording.Recorder`), so it would differ from what stock JAX
# computes from then on for a function whose state changed: none is recorded.
_FN_STATE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_MUTATED: weakref.WeakSet = weakref.WeakSet()
_STATE_LOCK = threading.Lock()


def note_states(funcs: list[tuple], bodies: list = ()) -> str | None:
    """Remember each walked function's state, and each partial's and bound method's
    (``bodies``: JAX keys a scan or checkpoint body's trace on that object too);
    return the name of one whose state changed since it was last walked (now or
    before), else None. (Each is keyed on its own: a node taken inside a larger walk
    numbers its back-references by that walk.) The objects a state names by id are
    held weakly (a strong hold could keep the function itself alive: a method's class
    holds the method); one that died is one the function no longer holds, so its
    state changed."""
    found = None
    done: set[int] = set()
    with _STATE_LOCK:
        for f in [f for _, _, f, _ in funcs] + list(bodies):
            if id(f) in done:
                continue
            done.add(id(f))
            name = getattr(f, "__qualname__", None) or type(f).__name__
            try:
                if f in _MUTATED:
                    found = found or name
                    continue
                hash(f)
            except TypeError:  # a method of an unhashable object: nothing to key it by
                found = found or name
                continue
            w = Walker()
            try:
                # its state, and the globals its own code reads now: JAX's identity
                # caches keep a trace of this object made with the globals of then
                reads = _guards.read_state(f, w) if type(f) is types.FunctionType else ()
                node = (w.callable(f), reads)
            except (NoReuse, RecursionError):
                continue
            seen = _FN_STATE.get(f)
            if seen is not None and (seen[0] != node or any(r() is None for r in seen[1])):
                _MUTATED.add(f)
                found = found or name
            _FN_STATE[f] = (node, _weak_refs(w.pins))
    return found


def _weak_refs(objs: list) -> tuple:
    out = []
    for o in objs:
        try:
            out.append(weakref.ref(o))
        except TypeError:  # dicts (a function's globals, held by the function itself)
            pass
    return tuple(out)


# ------------------------------------------------------------ the memo


@_memos.after_fork
def _after_fork_in_child() -> None:
    # A fork while another thread held this lock would leave the child waiting
    # forever on a lock nobody will release (the memo's: `pcache._trace_memo`).
    global _STATE_LOCK
    _STATE_LOCK = threading.Lock()


# ------------------------------------------------------------ why a miss


def _first_difference(a: Any, b: Any, codes: dict, where: str) -> str | None:
    """What differs between two callable keys, named for the user (None: equal)."""
    if a == b:
        return None
    if not (isinstance(a, tuple) and isinstance(b, tuple) and a and b and a[0] == b[0]):
        return f"value-changed:{where}" if where else "value-changed"
    tag = a[0]
    if tag == "F":  # ("F", code, globals, name, qualname, builtins, module, doc,
        #          defaults, kwdefaults, cells, attributes): `Walker._function`
        code = codes.get(a[1])
        name = a[4]
        if a[1] != b[1]:
            return f"code-changed:{name}"
        if a[2] != b[2] or a[5] != b[5]:
            return f"globals-changed:{name}"
        if a[8] != b[8] or a[9] != b[9]:
            return f"default-changed:{name}"
        if a[10] != b[10]:
            free = code.co_freevars if code is not None else ()
            for i, (x, y) in enumerate(zip(a[10], b[10], strict=False)):
                if x != y:
                    cell = free[i] if i < len(free) else str(i)
                    inner = _first_difference(x, y, codes, f"{name}.{cell}")
                    if inner is None or inner.startswith("value-changed"):
                        return f"closure-changed:{name}.{cell}"
                    return inner
        return f"attribute-changed:{name}"
    if tag == "P":
        if a[2] != b[2]:
            return _first_difference(a[2], b[2], codes, "partial.func") or "partial-changed"
        if a[3] != b[3]:
            return "partial-arg-changed"
        return "partial-keyword-changed"
    if tag == "M":
        if a[1] != b[1]:
            return _first_difference(a[1], b[1], codes, "method") or "method-changed"
        return "self-changed"
    if tag == "J":
        if a[1] != b[1]:
            return _first_difference(a[1], b[1], codes, where) or "jit-changed"
        return "jit-options-changed"
    return f"value-changed:{where}" if where else "value-changed"


def miss_reason(last: tuple | None, callable_key: tuple, rest: tuple) -> str:
    """Why a call missed, against the last trace recorded for the same functions
    (`TraceMemo.last`)."""
    if last is None:
        return "first-trace"
    last_key, last_rest, codes, recorded = last
    why = _first_difference(last_key, callable_key, codes, "")
    if why is not None:
        return why
    names = ("jit-options", "signature", "avals", "mesh", "config", "registry", "aliases")
    for name, x, y in zip(names, last_rest, rest, strict=True):
        if x != y:
            return f"{name}-changed"
    return "evicted" if recorded else "traced-once"  # (recorded now: `TraceMemo.sighted`)


# ------------------------------------------------------------ the seam


def infer_params_cached_wrapper(*args, **kwargs):
    """JAX's `_infer_params_cached`, where JAX's own entry is empty and trace reuse
    is on: serve an equal callable's trace, or record this one's."""
    _persist.unserve()  # (one prepared for an earlier call that raised first)
    fun, jit_info, signature, in_avals, ctx_mesh = _compat.InferParamsCall.of(args, kwargs)
    entry = _state.ORIG["infer_params"](*args, **kwargs)
    rt = _state.rt
    if rt is None or not rt.trace_reuse or entry.pjit_params is not None:
        return entry
    if _compat.recording() and not left_behind():
        return entry  # (inside a recording: traced afresh, never served nor recorded)
    try:
        with one_look():  # (it runs no program code: its walks check the indexes once)
            return _reuse(rt, entry, fun, jit_info, signature, in_avals, ctx_mesh)
    except CheckError:
        raise
    except Exception as exc:  # never the user's program: trace as without pcache
        rt.error("trace reuse", exc)
        return entry


def _key_of(w, rw, fun, jit_info, signature, in_avals, ctx_mesh, tabs=None) -> tuple:
    """The callable's key by ``w``, and the rest of the call's (registries by ``rw``;
    ``tabs``: `_guards.tables` read for this call), in the order `_changed` walks
    them again."""
    ck = w.value(fun)
    rest = (
        jit_options(w, jit_info),  # not ==: 1 == True == 1.0
        w.signature(signature),  # static arguments and trees by the walk's rules
        in_avals,
        ctx_mesh,
        # JAX's trace context, every option tracing may read, and the host's
        (_compat.trace_context(), _compat.config_snapshot(), _hoststate.host_state()),
        _guards.registry_key(rw, tabs),
        # objects the rules share with the callable and its arguments (a rule that
        # compares an argument tree's function with one it holds: identity)
        _guards.aliases(w, rw),
    )
    return ck, rest


def _reuse(rt, entry, fun, jit_info, signature, in_avals, ctx_mesh):
    blocked = _compat.trace_reuse_blocked()
    tabs = _guards.tables()  # (read once for this call)
    if blocked is None and _guards.user_type_handler(tabs):
        blocked = "user-type-handler"
    if blocked is None and not indexed_whole():  # (review 232: its objects unnamed)
        blocked = "library-initializing"
    if blocked is not None:
        return _missed(rt, entry, fun, blocked)
    persist, persisted = None, None
    if rt.settings.trace_persist and _persist.first_sighting(fun):
        served, persist, persisted = _first_call(
            rt, entry, fun, jit_info, signature, in_avals, ctx_mesh
        )
        if served is not None:
            return served
    w = Walker()
    rw = Walker()  # the registries' rules: guarded, but JAX holds no trace of them
    try:
        ck, rest = _key_of(w, rw, fun, jit_info, signature, in_avals, ctx_mesh, tabs)
        key = HashedKey((ck, rest))
        key_hash = key.hash
    except NoReuse as e:
        # Its functions may be traced by JAX's identity caches now: their state
        # from here on is what a later recording is compared with.
        note_states(w.funcs, w.bodies)
        return _missed(rt, entry, fun, e.reason)
    except TypeError:
        note_states(w.funcs, w.bodies)
        return _missed(rt, entry, fun, "unhashable-key")
    except RecursionError:
        return _missed(rt, entry, fun, "too-deep")
    try:
        rec = MEMO.get(key)
    except Exception:
        return _missed(rt, entry, fun, "uncomparable-key")
    why = None
    if rec is not None:
        why = rec.stale((w, rw))
        if why is None:
            if rt.check_mode:  # trace anyway, as stock JAX would now, and compare
                return Recorder(entry, lambda p, *_: _checked(rt, rec, p), fresh=False)
            if rec.holders is not None and not _hold(rec, key, fun):
                return _missed(rt, entry, fun, "unreferenceable-callable")
            rt.stats.trace_hit()
            return _compat.served_entry(rec.params)
        if why == "array-deleted":
            MEMO.drop(key, rec)  # its id may be another array's from now on
    skeleton = (tuple(id(c) for _, c, *_ in w.funcs), rest[0])
    why = why or miss_reason(MEMO.last(skeleton), ck, rest)
    # May this call's trace serve equal callables later? Not where JAX's own
    # identity-keyed trace caches might hand this trace an older state of one of
    # the functions (one whose state changed since pcache last saw it, or one
    # whose globals changed): that trace must not reach a new, equal callable.
    if why.startswith("global-changed:"):
        MEMO.never_record(skeleton)
    # (traced as JAX traces it, its functions' states noted: recorded if it comes again)
    settings = rt.settings
    if persist is None:
        persist = _persist.candidate(rt, fun)
    record = MEMO.sighted(key_hash, 1 if persist else settings.trace_record_after)
    try:
        guards, gw = _guards.guards_for(w.funcs + rw.funcs, (w, rw), rw.pins, reach=record)
    except NoReuse as e:
        note_states(w.funcs, w.bodies)
        return _missed(rt, entry, fun, e.reason)  # why it can never be reused
    _count_miss(rt, fun, why)
    mutated = note_states(w.funcs + gw.funcs, w.bodies + gw.bodies)
    if mutated is not None or MEMO.recording_refused(skeleton):
        return entry
    if not record:
        MEMO.saw(skeleton, ck, rest, {id(c): c for _, c, *_ in w.funcs})
        return entry
    call = (fun, jit_info, signature, in_avals, ctx_mesh)
    return _to_record(rt, entry, call, (key, skeleton, guards, ck, rest), (w, rw, gw),
                      persist, persisted)  # fmt: skip


def _to_record(rt, entry, call: tuple, keyed: tuple, walks: tuple, persist, persisted):
    """The recorder of a call to trace (``keyed``: its key, skeleton, guards,
    callable key and the rest; ``walks``: the walkers that made them), looked up in
    the store first if it is a persist candidate (``persisted``: looked up already)."""
    (key, skeleton, guards, ck, rest), (w, rw, gw) = keyed, walks
    fun, jit_info, signature = call[:3]
    frame = _persist.infer_params_frame() if persist else None
    if persisted is None:
        persisted = (
            _persist.lookup(rt, *call, frame=frame) if persist else _persist.Looked(None, None)
        )
    codes = {id(c): c for _, c, *_ in w.funcs}
    try:
        jax_arrays = tuple(weakref.ref(a) for a in (*w.arrays, *rw.arrays, *gw.arrays))
    except TypeError:
        return entry
    pins = w.pins + rw.pins + gw.pins
    warned = _replay.WARNINGS[0]
    spaces = _guards.namespaces(w.funcs + rw.funcs + gw.funcs) + _guards.library_spaces(guards)
    met = _late.mutable(w.keep + rw.keep + gw.keep)
    made = Made(key, skeleton, guards, pins, ck, rest, codes, jax_arrays, fun, warned,
                signature, jit_info, spaces, met)  # fmt: skip
    owned = fun if w.arrays else None  # the callable holds JAX arrays: see `_hold`
    return _recorder(rt, entry, made, owned, call, persisted, frame)


def _first_call(rt, entry, *call) -> tuple:
    """(what to hand JAX, whether the call is a persist candidate, its lookup) for the
    first call of a callable on code this process has not keyed: the stored trace
    if there is one (served on its persisted key alone), else (None, candidate,
    lookup) for the in-process path to go on with (it traces and stores)."""
    persist = _persist.candidate(rt, call[0])
    if not persist:
        return None, persist, None
    frame = _persist.infer_params_frame()
    looked = _persist.lookup(rt, *call, frame=frame)
    if looked.served is None:
        return None, persist, looked
    # (a function changed: the in-process path refuses it, and looks nothing up)
    return _served_first(rt, entry, call, looked, frame), persist, None


def _served_first(rt, entry, call: tuple, looked: Any, frame) -> Recorder | None:
    """A stored trace for the first call of a callable on code this process has not
    keyed (`_persist.first_sighting`): served on its persisted key alone, recorded
    in process by an equal callable's next call. None where a function the key
    walked changed since pcache last walked it (JAX's identity caches may hold a
    trace of its old state, which stock JAX would build this call from:
    `note_states`); a trace JAX made of a function pcache never walked (an eager
    ``lax.scan`` of it) is not seen, as on the in-process path (README: reuse never
    takes in a stale trace of JAX's)."""
    w, _, gw = looked.walks
    if note_states(w.funcs + gw.funcs, w.bodies + gw.bodies) is not None:
        return None
    served = looked.served
    _count_miss(rt, call[0], "first-trace")
    if not rt.check_mode:
        _persist.serve(call[0], call[3], served, frame)

    def record(p, *_) -> None:
        try:
            if rt.check_mode:
                _persist.check(rt, served, p)
            rt.stats.count("trace_persist_hits")
        except CheckError:
            raise
        except Exception as exc:
            rt.error("trace reuse", exc)

    return Recorder(entry, record, fill=not served.standins or rt.check_mode, watch=False)


def _recorder(rt, entry, made: Made, owned, call: tuple, persisted: tuple, frame) -> Recorder:
    """Trace and record for equal callables (and other processes: ``persisted``, this
    call's `_persist.lookup`; ``frame``: its `_infer_params` frame)."""
    pkey, served = persisted[:2]
    if served is not None and not rt.check_mode:
        _persist.serve(call[0], call[3], served, frame)
    t0 = _persist.timer()

    def record(p, reads: list, watching: float) -> None:
        traced = _persist.timer() - t0 - watching
        try:
            if served is not None and rt.check_mode:
                _persist.check(rt, served, p)
            if served is not None:
                rt.stats.count("trace_persist_hits")  # (recorded for this process or not)
                if served.standins and not rt.check_mode:
                    return  # (dispatch only: kept nowhere a transformation finds it)
            direct = None
            if served is not None:  # (what the storing process's program read, now)
                extra = _persist.served_reads(served)
                why = None if extra is not None else "module-reads-unloaded"
            else:
                extra, why, direct = read_guards(made.guards, reads)
            why = why or _record(made, p, owned, extra)
            if why is not None:
                rt.stats.count("trace_unrecorded", 0, why)
                if pkey is not None and served is None and why not in _persist.STORED:
                    _persist.not_stored(rt, call[0], why)
            if (why is None or why in _persist.STORED) and pkey is not None and served is None:
                t1 = _persist.timer()
                if _persist.key_again(rt, *call) == pkey:
                    key_s = _persist.timer() - t1
                    _persist.record(rt, pkey, p, traced, key_s, call[0], extra, direct)
                else:
                    rt.stats.count("trace_persist_misses", 0, "unstored:changed-while-traced")
        except CheckError:
            raise
        except Exception as exc:
            rt.error("trace reuse", exc)

    fill = served is None or not served.standins or rt.check_mode
    return Recorder(entry, record, fill=fill, watch=served is None)


class Made(NamedTuple):
    """What a miss keyed, for the trace it records."""

    key: Any
    skeleton: Any
    guards: list
    pins: list
    callable_key: tuple
    rest: tuple
    codes: dict
    jax_arrays: tuple
    fun: Any  # (for `_changed`: held only until the trace is recorded)
    warnings: int  # warnings issued in the process before the trace
    signature: Any  # JAX's argument signature (static arguments), walked again
    jit_info: Any  # JAX's jit options, walked again
    spaces: tuple  # (user module namespace, its keys, its values) before the trace
    met: dict  # what the walks met that the program can change (`pcache._late`)


def _changed(made: Made) -> str | None:
    """What the key and guards describe that is no longer what they say after the
    trace (None: nothing): a trace that wrote to anything it was keyed by (a
    captured container, a global, through any alias or helper) or ran while another
    thread changed it is not recorded."""
    w = Walker()  # walked in the key's order (identities are numbered in it)
    try:
        if w.value(made.fun) != made.callable_key:
            return "callable-changed"
        if jit_options(w, made.jit_info) != made.rest[0]:
            return "jit-options-changed"
        if w.signature(made.signature) != made.rest[1]:
            return "static-argument-changed"  # written through a static argument
    except (NoReuse, RecursionError):
        return "callable-changed"
    if _replay.WARNINGS[0] != made.warnings:
        return "warned"  # the trace warned: a reuse would not
    if not all(_guards.same_space(*sp) for sp in made.spaces):
        return "global-written"  # library code wrote a global (review 28)
    try:
        settings = (_compat.trace_context(), _compat.config_snapshot(), _hoststate.host_state())
        if settings != made.rest[4]:
            return "setting-changed"  # the trace changed a setting
        rw = Walker()
        if (_guards.registry_key(rw), _guards.aliases(w, rw)) != made.rest[-2:]:
            return "registry-changed"
    except (NoReuse, RecursionError):
        return "registry-changed"
    return None if _guards.failed_guard(made.guards, (w, rw)) is None else "global-changed"


def _record(made: Made, p, owned, extra: list) -> str | None:
    """Record trace ``p`` for equal callables (guarded by ``extra`` too: what the
    program read from library modules while traced): None, else why it was not
    (counted in ``stats()["trace_unrecorded"]``)."""
    why = _compat.unreusable_params(p) or _changed(made)
    if why == "warned":
        # A recording traces afresh, inner jits included, where JAX's caches would
        # have skipped a warning or print of theirs: tried once, not again.
        MEMO.never_record(made.skeleton)
    if why is not None:
        return why
    tree = _out_tree.verdict(p.out_tree, {id(o) for o in made.pins})
    if tree == _out_tree.OBJECTS:
        # The output tree's auxiliary data (a function, an object) is handed to the
        # caller: a reuse would hand back the recorded call's objects.
        return tree
    jaxpr = p.params["jaxpr"]
    callbacks, late = _canon.late_code(jaxpr)
    if _guards.user_primitives(_canon.primitives_of(jaxpr)):
        # A user primitive's rules run later too (transpose, lowering, batching), on
        # JAX's caches keyed by this jaxpr: a reuse shares them (review 47).
        return "user-primitive"
    if callbacks or any(user_code(c) for c in late):
        # Python this callable's objects run after the trace (host callbacks at
        # run time, a custom_vjp's bwd when differentiated): its side effects and
        # reads are this callable's own, so another callable must trace its own.
        # (A stored trace may hold them: `pcache._persist.STORED`.)
        return "host-callback" if callbacks else "later-user-code"
    if late and (_late.reaches(late, made.met) or _late.array_consts(jaxpr)):
        return "later-reads-program-data"  # (review 49)
    if tree is not None:
        return tree  # (a list in it: stored, served decoded afresh, never shared)
    try:
        arrays = _canon.jaxpr_arrays(jaxpr)
    except Uncacheable:
        arrays = None
    if arrays is None:
        return "constants-not-snapshotted"  # its buffers cannot be snapshotted
    nbytes = ENTRY_COST + sum(int(getattr(c, "nbytes", 0) or 0) for c in jaxpr.consts)
    rec = Recorded(
        p,
        extra + made.guards,
        arrays,
        made.pins,
        made.callable_key,
        made.rest,
        made.codes,
        nbytes,
        made.jax_arrays,
        [] if owned is not None else None,
    )
    if owned is not None and not _hold(rec, made.key, owned):
        return "callable-not-weakly-referenceable"
    if not MEMO.put(made.key, made.skeleton, rec):
        return "too-large"  # (over a quarter of the memo's bytes)
    RECORDED.add(jaxpr)
    return None


def _hold(rec: Recorded, key, fun) -> bool:
    """Tie ``rec`` to ``fun``'s life. A trace whose callable holds JAX arrays holds
    them too (its jaxpr's constants); stock JAX drops such a trace with the last
    function object it was made for, and so does the memo: the entry is forgotten
    when every callable it served has died."""
    holders = rec.holders
    assert holders is not None

    def died(ref, holders=holders) -> None:
        try:
            holders.remove(ref)
        except ValueError:
            return
        if not holders:
            MEMO.drop(key, rec)

    try:
        holders.append(weakref.ref(fun, died))
    except TypeError:
        return False
    return True


def _checked(rt, rec: Recorded, p) -> None:
    try:
        _check(rt, rec, p)
    except CheckError:
        raise
    except Exception as exc:
        rt.error("trace reuse", exc)


def _check(rt, rec: Recorded, p) -> None:
    """Check mode: the trace a reuse would have served must equal a fresh one."""
    old, new = rec.params, p
    same = (
        _canon.jaxpr_digest(old.params["jaxpr"]) == _canon.jaxpr_digest(new.params["jaxpr"])
        and old.in_tree == new.in_tree
        and old.out_tree == new.out_tree
        and old.in_avals == new.in_avals
        and {k: v for k, v in old.params.items() if k != "jaxpr"}
        == {k: v for k, v in new.params.items() if k != "jaxpr"}
    )
    if not same:
        raise CheckError(
            "pcache: trace reuse would have served a different trace for "
            f"{new.params.get('name')!r} (a false hit): the callable's key misses what changed"
        )
    rt.stats.trace_hit()


def _missed(rt, entry, fun, reason: str):
    _count_miss(rt, fun, reason)
    return entry


def _count_miss(rt, fun, reason: str) -> None:
    """A traced call, by why it was not served a recorded trace."""
    rt.stats.trace_miss(reason, MAX_REASONS)
    if rt.explain:
        name = getattr(fun, "__qualname__", None) or type(fun).__name__
        if rt._first(f"explain-trace:{name}:{reason}"):
            logger.warning("pcache: trace of %s not reused (%s)", name, reason)
    elif logger.isEnabledFor(logging.DEBUG):
        logger.debug("pcache: trace not reused (%s)", reason)


def clear() -> None:
    """Forget the recorded traces (a new runtime, `pcache.clear_memory`)."""
    MEMO.clear()


def forget_states() -> None:
    """After `jax.clear_caches()`: JAX holds no trace of any function any more."""
    MEMO.clear()
    with _STATE_LOCK:
        _FN_STATE.clear()
        _MUTATED.clear()


_memos.register("trace.function_states", forget_states, with_jax_caches=True)


__all__ = ["MEMO", "Recorded", "TraceMemo", "clear", "forget_states",
           "infer_params_cached_wrapper", "note_states"]  # fmt: skip
