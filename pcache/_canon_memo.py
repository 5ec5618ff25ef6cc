"""The memos under the canonical form, and process-local identity tokens.

`fresh()` switches every memo off (what ``JAX_PCACHE_CHECK`` compares against);
`IdMemo` maps live objects by identity (weakly) to a value; `BoundedMemo` is a
small LRU keyed by value; `local_token`/`local_eq_token` name objects that cannot
be persisted (callbacks, unserializable tree definitions), never reused in a process.
No JAX here: the canonical form (`pcache._canon`) and the key (`pcache._key`) use them.
"""

from __future__ import annotations

import collections
import contextlib
import contextvars
import itertools
import os
import secrets
import threading
import weakref
from typing import Any

# ----------------------------------------------------------------------------
# Identity memo: maps live objects (by identity) to a value, forgetting an entry
# when its object dies, so a recycled id() can never return a stale value.


# While set (``fresh()``), every memo of the canonical form, `pcache._key` and
# `pcache._jit_seam` answers "not known" and stores nothing: `JAX_PCACHE_CHECK=1`
# recomputes each key this way and compares.
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


class IdMemo:
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


# Process-local identity tokens for objects that cannot be persisted (callbacks).
_LOCAL_LOCK = threading.Lock()
# In every local token with the pid: a key that names process-local objects must not
# match one from another process that happened to get the same pid and serial.
_PROCESS_NONCE = secrets.token_hex(8)
_LOCAL_SERIAL = itertools.count()
# Identity tokens, not memos: a live object keeps its serial, a dead one's serial is
# never reused (weak references; objects without weakref support are kept alive).
_LOCAL_IDS = IdMemo(registry=True)
_LOCAL_STRONG: dict[int, tuple[Any, int]] = {}  # for objects without weakref support


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


# Process-local tokens for treedefs that cannot be serialized, keyed by PyTreeDef
# equality (structural, with custom nodes' aux data compared by __eq__). Sound for
# aux data with value semantics, which JAX requires of it (aux data must be hashable
# and comparable; JAX's own caches key on the same equality).
_LOCAL_EQ: dict[Any, int] = {}


def local_eq_token(obj: Any) -> str:
    with _LOCAL_LOCK:
        serial = _LOCAL_EQ.get(obj)
        if serial is None:
            serial = _LOCAL_EQ[obj] = next(_LOCAL_SERIAL)
    return f"localeq:{os.getpid()}:{_PROCESS_NONCE}:{serial}"


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
