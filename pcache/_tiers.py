"""What the runtime's tiers share: a request, a hit, a compile, and the protocol.

No JAX here. A seam asks the runtime for one program (a `Request`); the runtime walks
its tiers in order (memory, what the preload thread loaded, the local store, the
remote a fleet shares: `pcache._cache.Runtime.tiers`), and each answers with a
`Hit` or None. A hit fills the tiers before the one that had it (`Tier.put`); a
compile fills them all. Each tier counts its own hits and misses through the
runtime (`Runtime.count`) and reports its failures to it (`Runtime.error`): the
error policy is the runtime's.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from pcache._memory import MemoryTier

if TYPE_CHECKING:
    from pcache._cache import Runtime
    from pcache._key import CacheKey

#: ``load(raw, replay)``: deserialize an entry's bytes; ``replay`` is its signed
#: replay record (JSON, or None).
LoadFn = Callable[[bytes, Any], Any]


@dataclass
class Request:
    """One program asked of the tiers: by the jit seam (``key``, a `CacheKey`) or by
    the HLO seam (``key`` None: JAX's own key, stored as ``hlo-<key>``)."""

    digest: str
    load: LoadFn
    key: CacheKey | None = None
    #: The key space of its executable in the remote (`pcache._host`; "": this
    #: host's CPU class).
    host_class: str = ""
    #: ``accept(signature)``: whether a preloaded executable was loaded the way
    #: ``load`` would load it.
    accept: Callable[[Any], bool] | None = None
    #: The working set a persistent hit or compile is recorded in.
    working_set: str | None = None
    #: What is stored with a compile (`pcache.store.META_KEYS`, ``extra``).
    meta: dict[str, Any] = field(default_factory=dict)
    #: The single-flight lock's name (the digest, unless that cannot name a file).
    lock_name: str = ""

    @property
    def jit(self) -> bool:
        return self.key is not None

    @property
    def persistent(self) -> bool:
        return self.key is None or self.key.persistent

    @property
    def signed_extra(self) -> dict[str, Any]:
        """What the seam adds to the signed ``extra`` of an entry it compiles."""
        if self.key is None:
            return {"seam": "hlo"}
        return {"key_parts": [list(p) for p in self.key.parts]}


@dataclass
class Compiled:
    """What a miss produces: the loaded executable and its serialized bytes."""

    executable: Any
    serialized: bytes | None  # None: could not serialize (kept in memory only)
    compile_seconds: float
    #: What the memory tier keeps, if not ``executable`` (a callback program keeps
    #: its bytes, not an executable bound to this call's callbacks).
    memory_value: Any = None
    keep_in_memory: bool = True


@dataclass
class Hit:
    """A tier's answer: the loaded executable, and what lets the tiers before it keep
    a copy (``raw`` and ``meta`` with its ``extra``: None where the tier holds no
    bytes). ``defer(job)`` runs a copy's write off the critical path."""

    value: Any
    nbytes: int
    raw: bytes | None = None
    meta: dict[str, Any] | None = None
    defer: Callable[[Callable[[], Any]], None] | None = None


class Tier(Protocol):
    """A place executables are found in and kept."""

    name: str

    def lookup(self, req: Request) -> Hit | None:
        """The executable for ``req``, loaded, or None (a miss, or a failure counted
        and reported to the runtime)."""

    def put(self, req: Request, found: Hit | Compiled) -> bool:
        """Keep what a later tier found or a compile made; False if not kept."""

    def stats(self) -> dict[str, Any]:
        """The tier's state for `pcache.stats()` (its counters are the runtime's)."""


class Memory:
    """The memory tier (`pcache._memory.MemoryTier`): ready executables, for the jit
    seam only (JAX keeps what the HLO seam returns in its own caches)."""

    name = "memory"

    def __init__(self, rt: Runtime, max_bytes: int) -> None:
        self.rt = rt
        self.lru = MemoryTier(max_bytes)

    def get(self, digest: str, pick: Callable[[Any], Any] | None = None) -> Any | None:
        """The value for ``digest`` (or what ``pick`` takes of it), counted as a hit."""
        value = self.lru.get(digest)
        if value is not None and pick is not None:
            value = pick(value)
        if value is not None:
            self.rt.count("memory_hits")
        return value

    def lookup(self, req: Request) -> Hit | None:
        value = self.get(req.digest) if req.jit else None
        return None if value is None else Hit(value, 0)

    def keep(self, digest: str, value: Any, nbytes: int) -> None:
        evicted = self.lru.put(digest, value, nbytes)
        if evicted:
            self.rt.count("evictions", evicted)

    def put(self, req: Request, found: Hit | Compiled) -> bool:
        if not req.jit:
            return False
        if isinstance(found, Hit):
            self.keep(req.digest, found.value, found.nbytes)
            return True
        if not found.keep_in_memory:
            return False
        value = found.executable if found.memory_value is None else found.memory_value
        nbytes = len(found.serialized) if found.serialized is not None else 1 << 20
        self.keep(req.digest, value, nbytes)
        return True

    def stats(self) -> dict[str, Any]:
        lru = self.lru
        return {"entries": len(lru), "bytes": lru.bytes, "max_bytes": lru.max_bytes}

    def clear(self) -> None:
        self.lru.clear()

    def after_fork(self) -> None:
        self.lru._lock = threading.Lock()


class KeyedLocks:
    """Per-key threading locks, each dropped from the table when nobody holds it:
    the single-flight of one process's threads."""

    def __init__(self) -> None:
        self._locks: dict[str, threading.Lock] = {}
        self._lock = threading.Lock()

    def after_fork(self) -> None:
        self._locks = {}
        self._lock = threading.Lock()

    def hold(self, key: str) -> _Held:
        return _Held(self, key)


class _Held:
    def __init__(self, table: KeyedLocks, key: str) -> None:
        self.table, self.key = table, key

    def __enter__(self) -> None:
        t = self.table
        with t._lock:
            lk = t._locks.setdefault(self.key, threading.Lock())
        lk.acquire()
        self._lk = lk

    def __exit__(self, *exc: object) -> None:
        self._lk.release()
        t = self.table
        with t._lock:
            if not self._lk.locked():
                t._locks.pop(self.key, None)
