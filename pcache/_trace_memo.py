"""The trace memo of trace reuse (`pcache._trace`): callable key -> the trace JAX
made for an equal callable, bounded in entries and bytes; and what it needs to
decide that a key is worth recording (`TraceMemo.sighted`)."""

from __future__ import annotations

import collections
import dataclasses
import threading
import types
import weakref
from typing import Any

from pcache import _canon, _guards, _memos
from pcache._walk import Walker

#: Bounds of the trace memo: entries, and bytes. A recorded jaxpr keeps alive what
#: JAX's own caches hold for it (its MeshComputation and executable, keyed on the
#: jaxpr object), so each entry counts `ENTRY_COST` (measured: ~0.75 MB of RSS per
#: small CPU program) plus its constants, against a quarter of the memory tier's
#: bound (`configure`).
MAX_ENTRIES = 1024
ENTRY_COST = 768 * 1024
MAX_BYTES = 256 * 1024**2


@dataclasses.dataclass
class Recorded:
    """One reusable trace and what it was made from."""

    params: Any  # JAX's PjitParams
    guards: list[tuple]
    arrays: tuple  # the jaxpr's user numpy buffers, with snapshots (_canon.jaxpr_arrays)
    pins: list  # objects whose ids are in the key or the guards
    callable_key: tuple
    rest: tuple
    codes: dict[int, types.CodeType]  # id -> code, to name what changed on a miss
    nbytes: int
    jax_arrays: tuple = ()  # weak references to the JAX arrays the key names by id
    holders: list | None = None  # weak refs to the callables served (see `_hold`)

    def stale(self, callable_walk: Walker | None = None) -> str | None:
        """Why this trace no longer fits its key (a global, a buffer or an array
        changed); ``callable_walk``: this call's walk of its callable."""
        for r in self.jax_arrays:
            a = r()
            if a is None or a.is_deleted():
                return "array-deleted"
        if self.arrays and not _canon.same_contents(self.arrays):
            return "constant-changed"
        name = _guards.failed_guard(self.guards, callable_walk)
        return None if name is None else f"global-changed:{name}"


class TraceMemo:
    """Callable key -> `Recorded`, LRU, bounded in entries and constant bytes; plus,
    per function skeleton (the code objects a walk met), the last key recorded,
    to say what changed on a miss."""

    def __init__(self, max_entries: int = MAX_ENTRIES, max_bytes: int = MAX_BYTES):
        self.max_entries, self.max_bytes = max_entries, max_bytes
        self._d: collections.OrderedDict[Any, Recorded] = collections.OrderedDict()
        # skeleton -> (callable key, rest, codes, recorded) of the last trace of it
        self._last: collections.OrderedDict[Any, tuple] = collections.OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        # skeletons whose globals changed since a trace of them: never recorded again
        self._refused: collections.OrderedDict[Any, None] = collections.OrderedDict()
        # hash of a key -> how often it was traced, until it is recorded (`sighted`)
        self._seen: collections.OrderedDict[int, int] = collections.OrderedDict()

    def sighted(self, key_hash: int, after: int) -> bool:
        """Count one more trace of the key hashing to ``key_hash``; whether this one
        is the ``after``-th (or later), to be recorded. (Two keys of one hash count
        as one: a trace recorded sooner, never a different one served.)"""
        if after <= 1:
            return True
        with self._lock:
            n = self._seen.pop(key_hash, 0) + 1
            if n < after:
                self._seen[key_hash] = n
                while len(self._seen) > 4 * self.max_entries:
                    self._seen.popitem(last=False)
            return n >= after

    def never_record(self, skeleton) -> None:
        with self._lock:
            self._refused[skeleton] = None
            while len(self._refused) > self.max_entries:
                self._refused.popitem(last=False)

    def recording_refused(self, skeleton) -> bool:
        return skeleton in self._refused

    def get(self, key) -> Recorded | None:
        with self._lock:
            rec = self._d.get(key)
            if rec is not None:
                self._d.move_to_end(key)
            return rec

    def drop(self, key, rec: Recorded) -> None:
        """Forget ``key`` if it still names ``rec``."""
        with self._lock:
            if self._d.get(key) is rec:
                del self._d[key]
                self._bytes -= rec.nbytes

    def drop_jaxpr(self, jaxpr) -> None:
        """Forget every trace of ``jaxpr`` (its lowering holds state of its own)."""
        with self._lock:
            for key in [k for k, r in self._d.items() if r.params.params["jaxpr"] is jaxpr]:
                self._bytes -= self._d.pop(key).nbytes

    def saw(self, skeleton, callable_key: tuple, rest: tuple, codes: dict) -> None:
        """A key traced but not recorded: the last one of ``skeleton`` (`last`)."""
        with self._lock:
            self._last[skeleton] = (callable_key, rest, codes, False)
            self._last.move_to_end(skeleton)
            while len(self._last) > self.max_entries:
                self._last.popitem(last=False)

    def last(self, skeleton) -> tuple | None:
        with self._lock:
            return self._last.get(skeleton)

    def put(self, key, skeleton, rec: Recorded) -> bool:
        if rec.nbytes > self.max_bytes // 4:
            return False
        with self._lock:
            old = self._d.pop(key, None)
            if old is not None:
                self._bytes -= old.nbytes
            self._d[key] = rec
            self._bytes += rec.nbytes
            self._last[skeleton] = (rec.callable_key, rec.rest, rec.codes, True)
            self._last.move_to_end(skeleton)
            while len(self._d) > self.max_entries or self._bytes > self.max_bytes:
                _, dropped = self._d.popitem(last=False)
                self._bytes -= dropped.nbytes
            while len(self._last) > self.max_entries:
                self._last.popitem(last=False)
        return True

    def clear(self) -> None:
        with self._lock:
            self._d.clear()
            self._last.clear()
            self._refused.clear()
            self._seen.clear()
            self._bytes = 0

    def configure(self, memory_bytes: int) -> None:
        """Bound the memo by a quarter of the memory tier's bound."""
        with self._lock:
            self.max_bytes = max(4 * ENTRY_COST, min(memory_bytes // 4, 1 << 40))

    def __len__(self) -> int:
        return len(self._d)

    @property
    def bytes(self) -> int:
        return self._bytes


class HashedKey:
    """A reuse key with its hash computed once (hashing the nested tuples of a key
    costs as much as comparing them, and a hit both counts it and looks it up)."""

    __slots__ = ("key", "hash")

    def __init__(self, key: tuple) -> None:
        self.key = key
        self.hash = hash(key)

    def __hash__(self) -> int:
        return self.hash

    def __eq__(self, other: object) -> bool:
        return (
            type(other) is HashedKey
            and self.hash == other.hash
            and (self.key is other.key or self.key == other.key)
        )


MEMO = _memos.memo("trace.memo", TraceMemo())


@_memos.after_fork
def _after_fork_in_child() -> None:
    # A fork while another thread held the lock would leave the child waiting
    # forever on a lock nobody will release.
    MEMO._lock = threading.Lock()


#: The jaxprs of recorded traces (weakly): a reuse hands JAX this very object, whose
#: lowering JAX's own `_pjit_lower` cache holds (`_jit_seam.pjit_lower_wrapper`).
RECORDED: weakref.WeakSet = weakref.WeakSet()


__all__ = ["ENTRY_COST", "MAX_BYTES", "MAX_ENTRIES", "MEMO", "RECORDED", "Recorded", "TraceMemo"]
