"""The cache runtime: the order of the tiers, single-flight, counting and the error policy.

No JAX internals here (only the public `jax.monitoring`): the seams
(`pcache._jit_seam`, `pcache._hlo_seam`) ask it for executables by key and hand it
closures that compile and deserialize. A lookup walks the tiers in order
(`pcache._tiers`): memory, what the preload thread loaded and the store
(`pcache._local`), the remote a fleet shares (`pcache._remote_tier`). A hit fills
the tiers before the one that had it. A miss compiles once per key across
threads (a keyed lock), processes (`pcache._flight`) and hosts (the remote's
lease), for both seams alike (`_single_flight`).

Everything degrades to "compile normally": a failure of the cache is counted, logged
once per cause, and never reaches the user's program unless ``raise_errors`` is
set (``JAX_PCACHE_RAISE_ERRORS=1``, for tests). Every event is recorded by one
function (`Runtime.count`), which feeds `stats()`, the store's persisted counters
and `jax.monitoring` as `pcache._stats.SINKS` says.
"""

from __future__ import annotations

import atexit
import hashlib
import logging
import threading
import time
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax.monitoring

from pcache import _memos
from pcache._config import Settings
from pcache._flight import Flight
from pcache._key import CacheKey
from pcache._local import Local, NoStore, Preloaded
from pcache._preload import PreloadFn
from pcache._remote_tier import Fleet
from pcache._signing import ENTRY_FORMAT, SIGNED_EXTRA
from pcache._stats import SINKS, Stats
from pcache._tiers import Compiled, KeyedLocks, LoadFn, Memory, Request, Tier

logger = logging.getLogger("pcache")

__all__ = ["ENTRY_FORMAT", "SIGNED_EXTRA", "Compiled", "NoStore", "Runtime"]


class Runtime:
    """One enabled pcache: its settings, its tiers, the counters."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.stats = Stats()
        self._warned: set[str] = set()
        self._warn_lock = threading.Lock()
        self._threads = KeyedLocks()
        self.memory = Memory(self, settings.max_memory_bytes)
        self.local = Local(self, settings)
        self.preloaded = Preloaded(self, self.local, settings.preload, settings.max_memory_bytes)
        self.flight = self._open_flight(settings.layout.locks)
        self.fleet = Fleet(self, settings.remote) if settings.remote is not None else None
        self.tiers: list[Tier] = [self.memory, self.preloaded, self.local]
        if self.fleet is not None and self.fleet.client is not None:
            self.tiers.append(self.fleet)
        # A fork while another thread holds one of these would leave the child
        # waiting forever on a lock nobody will release: give the child new ones.
        _memos.reset_after_fork(self)
        me = weakref.ref(self)
        atexit.register(lambda: (rt := me()) and rt._at_exit())

    def _open_flight(self, locks_dir: Path) -> Flight | None:
        try:
            locks_dir.mkdir(mode=0o700, exist_ok=True)
        except OSError as exc:
            if not self.local.read_only:
                self.background_error("single-flight lock directory", exc)
            return None  # read-only: nothing is compiled into the store anyway
        s = self.settings
        return Flight(locks_dir, timeout=s.lock_timeout, stale=s.lock_stale)

    # What the seams and `pcache.stats()` read.
    path = property(lambda self: self.settings.path)
    check_mode = property(lambda self: self.settings.check)
    explain = property(lambda self: self.settings.explain)
    trace_reuse = property(lambda self: self.settings.trace_reuse)
    store = property(lambda self: self.local.store)

    #: The remote tier's client (`pcache._remote.Remote`), None if off or none.
    remote = property(lambda self: self.fleet.client if self.fleet else None)
    remote_off_reason = property(lambda self: self.fleet.off_reason if self.fleet else "")

    def remote_info(self) -> dict[str, Any] | None:
        return self.fleet.stats() if self.fleet else None

    def upload(self, digest: str, replace: bool = False) -> int | None:
        """`pcache remote push`: see `pcache._remote_tier.Fleet.upload`."""
        return self.fleet.upload(digest, replace) if self.fleet else None

    # -- lifetime -------------------------------------------------------------

    def _after_fork(self) -> None:
        # The preload threads and the save timer do not exist in the child.
        self.preloaded.after_fork()
        self._warn_lock = threading.Lock()
        self._threads.after_fork()
        self.memory.after_fork()
        self.stats._lock = threading.Lock()
        if self.flight is not None:
            self.flight.after_fork()

    def _at_exit(self, join_timeout: float | None = None) -> None:
        # Before JAX's own exit hooks (atexit runs last-registered first): a preload
        # thread must not be inside the backend while it is torn down, so at exit we
        # wait for the one load in flight however long it takes.
        self.preloaded.stop(join_timeout)
        if self.fleet is not None:  # a forked child flushes its own writes (and leases)
            self.fleet.flush_at_exit()

    def close(self) -> None:
        self._at_exit(join_timeout=10.0)
        self.clear_memory()
        if self.fleet is not None:
            self.fleet.close()
        try:
            self.local.store.close()
        except Exception as exc:  # closing must not break interpreter shutdown
            self.error("close", exc)

    #: ``save_working_sets()``: write this run's working sets now (else soon, and at exit).
    save_working_sets = property(lambda self: self.preloaded.working_sets.save)

    # -- counting and the error policy ------------------------------------------

    def count(self, event: str, n: float = 1, why: str = "", **also: float) -> None:
        """Record ``n`` of ``event`` (``why``: its reason) in `stats()`, and in the
        other sinks `pcache._stats.SINKS` names for it; ``also``: more events of the
        same moment (one update of the store's counters for them all)."""
        persisted: dict[str, float] = {}
        for name, k in ((event, n), *also.items()):
            monitor, persist = SINKS.get(name, ("", ""))
            if monitor == "duration":
                jax.monitoring.record_event_duration_secs(f"/pcache/{name}", k)
                continue
            self.stats.count(name, k, why if name == event else "")
            if monitor:
                jax.monitoring.record_event(f"/pcache/{name}")
            if persist:
                persisted[persist + why if persist[-1] == ":" else persist] = k
        if persisted:
            try:
                self.local.store.bump(persisted)
            except Exception as exc:
                self.error("store counters", exc)

    def error(self, cause: str, exc: BaseException) -> None:
        """A cache failure: count it, log it once per cause, or raise in test mode.

        A log record, never a warning: under ``-W error`` (pytest's
        ``filterwarnings = error``) a warning would become an exception inside the
        user's jit call, and a cache failure must only ever cost a compile.
        """
        self.count("errors", why=cause)
        if self.settings.raise_errors:
            raise exc
        self.log_once(
            cause,
            exc,
            "pcache: %s failed (%s: %s); compiling normally. Further failures of this "
            "kind are counted in pcache.stats() and logged at DEBUG.",
        )

    def background_error(self, cause: str, exc: BaseException) -> None:
        """A failure on a helper thread or at exit: counted and logged once per cause,
        never raised (not even with ``raise_errors``: nobody joins that thread)."""
        self.count("errors", why=cause)
        self.log_once(cause, exc, "pcache: %s failed (%s: %s); the cache itself is unaffected")

    def store_report(self, message: str, category: type[Warning], cause: str) -> None:
        """What the store reports (damage it found and removed): logged once per
        cause, like any other cache failure, never warned inside a user's call."""
        if category.__name__ == "StoreCorruptionWarning" and cause != "database":
            cause = "damaged entry"  # however the store found it: one cause to the user
        self.count("errors", why=cause)
        (logger.warning if self.first(f"store:{cause}") else logger.debug)("%s", message)

    def log_once(self, cause: str, exc: BaseException, message: str) -> None:
        log = logger.warning if self.first(f"{cause}:{type(exc).__name__}") else logger.debug
        log(message, cause, type(exc).__name__, exc)

    def first(self, tag: str) -> bool:
        """Whether ``tag`` is seen for the first time (what is logged once)."""
        with self._warn_lock:
            first = tag not in self._warned
            self._warned.add(tag)
        return first

    _first = first  # `pcache._trace` asks by this name

    def bypass(self, reason: str, detail: str = "") -> None:
        """A program pcache cannot identify: compiled normally, every time. Counted
        here and in the store (``bypass:<reason>``, what `pcache stats` lists)."""
        self.count("bypasses", why=reason)
        if self.settings.explain and self.first(f"explain-bypass:{reason}"):
            logger.warning("pcache: never cached (%s): %s", reason, detail)
        else:
            logger.debug("pcache: bypass (%s) %s", reason, detail)

    def nonpersistent(self, key: CacheKey) -> None:
        """A program whose key is valid in this process only (host callbacks, user
        lowering rules): compiled into the memory tier, never stored. Counted here
        and in the store (``nonpersistent:<why>``)."""
        why = key.local_why or "process-local"
        self.count("nonpersistent", why=why)
        logger.debug("pcache: %s is memory-only (%s)", key.digest[:12], why)

    # -- preloading a program's working set ------------------------------------

    def preload_pending(self, name: str) -> bool:
        """True until the first persistent lookup of working set ``name`` (one per
        program and backend) has started its preload."""
        return self.preloaded.pending(name)

    def start_preload(
        self, name: str, current: str, usable: Callable[[Any], bool], load: PreloadFn
    ) -> None:
        """Once per working set: start loading what the previous run of this program
        used on this backend (`pcache._local.Preloaded.start`)."""
        self.preloaded.start(name, current, usable, load)

    def clear_memory(self) -> None:
        """Empty the memory tier and drop preloads nobody has asked for."""
        self.memory.clear()
        self.preloaded.release()

    # -- lookups --------------------------------------------------------------

    #: ``memory_lookup(digest, pick=None)``: `pcache._tiers.Memory.get`.
    memory_lookup = property(lambda self: self.memory.get)

    def lookup(
        self,
        key: CacheKey,
        load: LoadFn,
        accept: Callable[[Any], bool] | None = None,
        working_set: str | None = None,
        host_class: str = "",
    ) -> Any | None:
        """The jit seam's lookup: a ready executable from the first tier that has
        it, or None. ``accept(signature)`` is asked about a preloaded executable:
        whether it was loaded the way ``load`` would load it. A persistent key that
        hits is recorded in the working set ``working_set``."""
        req = Request(key.digest, load, key, host_class, accept, working_set)
        return self._walk(req, self.tiers, share=True)

    def _walk(self, req: Request, tiers: list[Tier], share: bool = False) -> Any | None:
        """Ask ``tiers`` in order. A hit fills the tiers before it; ``share``: the
        tiers after it are offered it too (the remote uploads what it lacks). A
        memory hit returns at once: nothing before it, the rest saw it already."""
        for i, tier in enumerate(tiers):
            hit = tier.lookup(req)
            if hit is None:
                if tier is self.memory and not req.persistent:
                    return None
                continue
            if tier is not self.memory:
                for other in tiers[:i] + (tiers[i + 1 :] if share else []):
                    other.put(req, hit)
            if req.working_set is not None and req.persistent:
                self.preloaded.working_sets.add(req.working_set, req.digest)
            return hit.value
        return None

    # -- the miss path --------------------------------------------------------

    def compile_through(
        self,
        key: CacheKey,
        compile_fn: Callable[[], Compiled],
        load: LoadFn,
        meta: dict[str, Any],
        accept: Callable[[Any], bool] | None = None,
        working_set: str | None = None,
        host_class: str = "",
    ) -> Any:
        """A miss of the jit seam: compiled once across threads, processes and hosts
        (`_single_flight`); ``meta`` is stored with the entry."""
        self.count("misses")  # the store persists its own hit/miss counters
        req = Request(key.digest, load, key, host_class, accept, working_set, meta)
        return self._single_flight(req, compile_fn)

    def hlo_get(self, key: str, load: Callable[[bytes], Any], host_class: str = "") -> Any | None:
        """The executable stored for JAX's cache key ``key``, loaded by ``load``
        (an entry that fails to load is dropped: a local one removed, a remote
        one never copied here); None on a miss."""
        req = Request("hlo-" + key, lambda raw, _replay: load(raw), host_class=host_class)
        exe = self._walk(req, self.tiers, share=True)
        self.count("hlo_hits" if exe is not None else "hlo_misses")
        return exe

    def hlo_compile_through(
        self,
        key: str,
        compile_fn: Callable[[], tuple[Any, bytes | None]],
        load: Callable[[bytes], Any],
        meta: Callable[[], dict[str, Any]],
        host_class: str = "",
    ) -> Any:
        """A miss of the HLO-level seam, compiled once as the jit seam's are
        (``compile_fn() -> (executable, bytes or None)``; ``meta()`` what is stored
        with it)."""
        # JAX's key starts with the module's name: the lock file is named by a hash.
        lock_name = "hlo-" + hashlib.sha256(key.encode()).hexdigest()
        req = Request("hlo-" + key, lambda raw, _replay: load(raw), host_class=host_class)
        req.lock_name = lock_name

        def compile() -> Compiled:
            t0 = time.perf_counter()
            exe, raw = compile_fn()  # a compile error is the program's: it propagates
            secs = time.perf_counter() - t0
            if raw is not None:
                try:
                    req.meta = meta()
                except Exception as exc:
                    self.error("hlo store", exc)
                    raw = None
            return Compiled(exe, raw, secs, keep_in_memory=False)

        return self._single_flight(req, compile)

    def _single_flight(self, req: Request, compile_fn: Callable[[], Compiled]) -> Any:
        """Compile ``req`` on a miss, once: another thread of this process, another
        process of this directory (`pcache._flight`, bounded by ``lock_timeout``;
        a dead holder's lock is released by the OS) or another host (the remote's
        lease) compiling it is waited for, and what it stored is loaded."""
        with self._threads.hold(req.digest):
            # Another thread may have filled the memory tier meanwhile; a preload may
            # hold it (e.g. AOT .compile(compiler_options=...) keyed anew).
            value = self._walk(req, [self.memory, self.preloaded])
            if value is not None:
                return value
            if not req.persistent:
                self.nonpersistent(req.key)
                return self._compile_and_fill(req, compile_fn)[0]
            if req.working_set is not None:
                self.preloaded.working_sets.add(req.working_set, req.digest)
            started = time.monotonic()  # one bound for the local and the remote wait
            ticket = self._claim(req.lock_name or req.digest)
            try:
                # Whoever held the lock before us has probably stored the result (the
                # HLO seam's other threads too: it has no memory tier); one indexed
                # read is nothing next to a compile. (`has` first: the lookup before
                # the lock already counted this miss in the store.)
                if (ticket is not None or not req.jit) and self.local.has(req.digest):
                    value = self._walk(req, [self.memory, self.local])
                    if value is not None:
                        if not req.jit:
                            self.count("hlo_hits")
                        return value
                value, stored = self._fleet_compile(req, compile_fn, started)
                if stored and ticket is not None:
                    ticket.done()
                return value
            finally:
                if ticket is not None:
                    ticket.release()

    def _claim(self, name: str) -> Any | None:
        """The single-flight ticket for ``name`` (`_flight.Ticket`), after waiting
        for a live holder; None where nothing is stored (read-only, no lock dir)."""
        if self.local.read_only or self.flight is None:
            return None
        ticket = self.flight.claim(name)
        if ticket.waited:
            self.count("lock_waits")
        s = self.settings
        if ticket.outcome == "error":
            self.error("single-flight lock", ticket.error)
        elif ticket.outcome in ("timeout", "stale"):
            why = (
                f"has not finished in {s.lock_timeout:.0f} s"
                if ticket.outcome == "timeout"
                else f"stopped beating for {s.lock_stale:.0f} s (stopped or hung)"
            )
            self.error(
                "single-flight lock",
                TimeoutError(f"the process compiling {name[:12]} {why}; compiling it here too"),
            )
        return ticket

    def _fleet_compile(
        self, req: Request, compile_fn: Callable[[], Compiled], started: float
    ) -> tuple[Any, bool]:
        """Compile ``req`` once for the fleet: take its remote lease (or wait for the
        host holding it and load what it stored), compile, and hand the lease to
        the remote write. Returns (value, stored locally). The wait for another
        host ends ``lock_timeout`` after ``started`` (when the wait for the local
        lock began)."""
        fleet = self.fleet
        if fleet is None or fleet.client is None:
            return self._compile_and_fill(req, compile_fn)
        lease = fleet.claim(req, self.settings.lock_timeout - (time.monotonic() - started))
        handed = False
        try:
            miss = "missing"
            if lease is not None and lease.outcome != "off":
                # Held: whoever held it before stored the entry, or nobody did.
                hit, miss = fleet.fetch(req, recheck=True)
                if hit is not None:
                    for tier in (self.memory, self.local):
                        tier.put(req, hit)
                    if not req.jit:
                        self.count("hlo_hits")
                    return hit.value, True
            handed = lease is not None and lease.held
            return self._compile_and_fill(req, compile_fn, lease if handed else None, miss)
        finally:
            if lease is not None and lease.held and not handed:
                fleet.release(lease)

    def _compile_and_fill(
        self, req: Request, compile_fn: Callable[[], Compiled], lease: Any = None, miss: str = ""
    ) -> tuple[Any, bool]:
        """Compile, fill the tiers; returns (executable, whether it was stored
        locally). ``lease``: the remote lease, released once the remote write is
        done (or at once if nothing is written)."""
        fleet = self.fleet
        try:
            compiled = compile_fn()
        except BaseException:
            if lease is not None:
                fleet.release(lease)
            raise
        self.count("compiles" if req.jit else "hlo_compiles")
        if fleet is not None:
            fleet.note_compile(compiled.compile_seconds)
        self.memory.put(req, compiled)
        if not req.persistent or compiled.serialized is None:
            if lease is not None:
                fleet.release(lease)
            return compiled.executable, False
        meta = {**req.meta, "compile_seconds": compiled.compile_seconds}
        req.meta = {**meta, "extra": {**meta.get("extra", {}), **req.signed_extra}}
        stored = self.local.put(req, compiled)
        if fleet is not None and fleet.client is not None:
            fleet.put(req, compiled, lease, miss)
        elif lease is not None:
            fleet.release(lease)
        return compiled.executable, stored
