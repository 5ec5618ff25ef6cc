"""Which callables' persisted traces are not worth looking up (issue 27's cost policy).

A persisted lookup computes the call's content key (`pcache._persist_key`: ~1-2 ms for
a callable first met in a process) and decodes what it finds: for a small program
that is about what tracing it costs, so a process of many small jits ran slower with
persisted traces than without (NumPyro's NUTS example: 195 traces served, 0.7 s
more). So a trace is stored only when tracing it and digesting the jaxpr (what a
traced call does to find its executable) took ``trace_persist_min_gain`` times what
serving it costs (measured when it is written), and a callable whose
trace was not stored, as too cheap or for a reason that its next trace will have
again (host callbacks, objects in its output tree, a param with no data encoding),
is remembered by its `stub`; later calls of a callable with that stub, in this
process and later ones, skip the lookup.

A stub is a cheap name, not a key: two callables may share one (two lambdas of one
line over other constants), and then both are skipped. Skipping a lookup only ever
misses; nothing is served by a stub. The stubs live in the store's key set
`HINTS` (hints, as working sets are: unsigned, and whoever edits them can only add
or remove lookups), read once per process and written a few at a time and at exit.
"""

from __future__ import annotations

import atexit
import functools
import os
import threading
import time
import types
from typing import Any

from pcache import _memos
from pcache._persist_pack import packed
from pcache._usercode import NoReuse

#: The store's key set holding the stubs of callables not stored; named anew when
#: what pcache stores changes (2: a library's host callbacks; 3: a trace's saving counts
#: the digest a traced call makes for its executable), so a stub an older
#: pcache wrote does not keep a callable it would now store from being looked up.
HINTS = "pcache:traces-not-stored:3"
_FLUSH_EVERY = 16  # stubs
_FLUSH_AFTER = 2.0  # seconds
_MAX = 4096
_LOCK = threading.Lock()
# "known": stubs read from the store and remembered since; "new": not written yet;
# "flushed": when last written; "store": the store they were read from
_STATE: dict = _memos.memo("persist.hints", {})


def stub(fun: Any) -> str | None:
    """A cheap content name of the callable handed to ``jax.jit``: each plain
    function's module, qualified name and code digest, through exact
    ``functools.partial`` objects and the ``__wrapped__`` chain JAX's transformations
    leave (``jax.grad(f)`` names ``f`` too); None for anything else."""
    from pcache._persist_key import code_digest

    parts: list = []
    f = fun
    try:
        for _ in range(8):
            if type(f) is functools.partial:
                parts.append(("partial",))
                f = f.func
                continue
            if type(f) is not types.FunctionType:
                break
            mod, qual = f.__module__, f.__qualname__
            parts.append((mod if type(mod) is str else "", qual, code_digest(f.__code__)))
            d = f.__dict__
            f = d.get("__wrapped__") if type(d) is dict else None
            if f is None:
                break
    except (NoReuse, RecursionError):
        return None
    return packed(b"pcache-trace-stub\n", tuple(parts)) if parts else None


def _after_fork_in_child() -> None:
    # (a thread of the parent may have held the lock while it read the store: review 109;
    # the parent writes what it remembered, the child starts over from the store)
    global _LOCK
    _LOCK = threading.Lock()
    _STATE.clear()


os.register_at_fork(after_in_child=_after_fork_in_child)


def _known(rt) -> set:
    store = rt.local.store
    st = _STATE
    if st.get("store") is not store:
        try:
            read = set(store.key_set(HINTS)[:_MAX])  # (a planted set: bounded)
        except Exception as exc:  # (a hint: never worth failing a call for)
            rt.error("store read (trace hints)", exc)
            read = set()
        st.update(store=store, known=read, new=[], flushed=time.monotonic())
    return st["known"]


def skip(rt, s: str) -> bool:
    """Whether a callable with stub ``s`` was not stored before (skip its lookup)."""
    with _LOCK:
        return s in _known(rt)


def remember(rt, s: str | None) -> None:
    """Remember that the trace of a callable with stub ``s`` was not stored."""
    if s is None or rt.local.read_only:
        return
    with _LOCK:
        known = _known(rt)
        if s in known:
            return
        known.add(s)
        _STATE["new"].append(s)
        if not _STATE.get("atexit"):
            _STATE["atexit"] = True
            atexit.register(_at_exit, rt)
        due = len(_STATE["new"]) >= _FLUSH_EVERY
        due = due or time.monotonic() - _STATE["flushed"] > _FLUSH_AFTER
    if due:
        flush(rt)


def _at_exit(rt) -> None:
    try:
        flush(rt)
    except Exception:  # noqa: S110 - (at exit, a hint is never worth a traceback)
        pass


def flush(rt) -> None:
    """Write the stubs remembered since the last write (merged with the store's:
    another process's written meanwhile are kept; one lost in a race is a lookup)."""
    with _LOCK:
        new, store = _STATE.get("new"), _STATE.get("store")
        if not new or store is None:
            return
        _STATE["new"], _STATE["flushed"] = [], time.monotonic()
    try:
        stored = store.key_set(HINTS)
        seen = set(new)
        store.put_key_set(HINTS, (new + [k for k in stored if k not in seen])[:_MAX])
    except Exception as exc:
        rt.error("store write (trace hints)", exc)


__all__ = ["HINTS", "flush", "remember", "skip", "stub"]
