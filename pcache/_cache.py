"""The cache runtime: the tiers, single-flight, stats and the error policy.

No JAX internals here (only the public `jax.monitoring`): the seams
(`pcache._jit_seam`, `pcache._hlo_seam`) ask it for executables by key and hand it
closures that compile and deserialize. Every lookup goes through one path:
`memory_lookup` for the memory tier (also what `pjit_lower_wrapper` reuses
computations through), then what the preload thread loaded, then the store
(`_read_verified`). Everything degrades to "compile normally": a failure of the
cache is counted, logged once per cause, and never reaches the user's program
unless ``raise_errors`` is set (``JAX_PCACHE_RAISE_ERRORS=1``, for tests).

Entry signing lives in `pcache._signing`, the cross-process locks (with their
heartbeat) in `pcache._flight`, the memory tier in `pcache._memory`; all three are
JAX-free. The remote tier a fleet shares (`pcache._remote`, JAX-free too) comes
after the store: `_load_from_remote` on a local miss, `_fleet_compile` around a
compile (the fleet-wide lease), `_remote_put` after it. A store that cannot be
written is used read-only (hits only, ``writes_skipped`` counted), one that cannot
be used at all is replaced by `NoStore` (memory tier only), each with one logged
warning.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import hashlib
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jax.monitoring

from pcache import _config
from pcache._config import Settings
from pcache._errors import (
    CacheDirError,
    CheckError,
    CorruptEntryError,
    IntegrityError,
    PcacheError,
    StaleEntryError,
)
from pcache._flight import Flight
from pcache._key import CacheKey
from pcache._memory import MemoryTier
from pcache._preload import Preloader, PreloadFn, PreloadHost, WorkingSets
from pcache._signing import ENTRY_FORMAT, SIGNED_EXTRA, Signer, load_secret
from pcache._stats import Stats

logger = logging.getLogger("pcache")

#: ``load(raw, replay)``: deserialize an entry's bytes; ``replay`` is its signed
#: replay record (JSON, or None).
LoadFn = Callable[[bytes, Any], Any]

__all__ = ["ENTRY_FORMAT", "SIGNED_EXTRA", "Compiled", "NoStore", "Runtime"]

#: Store counters that name why programs are not cached (`pcache stats` lists them).
BYPASS_PREFIX = "bypass:"
#: What a remote entry's metadata may give the local store (`pcache.store.META_KEYS`).
_META_KEYS = ("backend", "device_kind", "jax_version", "jaxlib_version", "function_name")
_META_KEYS += ("compile_seconds",)
NONPERSISTENT_PREFIX = "nonpersistent:"


# ------------------------------------------------------------------- the runtime


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


class Runtime:
    """One enabled pcache: a directory, its store, the memory tier and the counters."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        layout = settings.layout
        self.path = path = settings.path
        self.raise_errors = settings.raise_errors
        self.lock_timeout = settings.lock_timeout
        self.lock_stale = settings.lock_stale
        self.explain = settings.explain
        self.check_mode = settings.check
        self.trace_reuse = settings.trace_reuse
        self.stats = Stats()
        self.memory = MemoryTier(settings.max_memory_bytes)
        self._warned: set[str] = set()
        self._warn_lock = threading.Lock()
        self._inflight: dict[str, threading.Lock] = {}
        self._inflight_lock = threading.Lock()
        # A fork while another thread holds one of these would leave the child
        # waiting forever on a lock nobody will release: give the child new ones.
        me = weakref.ref(self)
        os.register_at_fork(after_in_child=lambda: (rt := me()) and rt._reset_locks_after_fork())
        try:
            _make_private_dir(path)
            _warn_if_untrusted(path)
            secret = load_secret(layout.secret, create=os.access(path, os.W_OK))
        except (OSError, PcacheError) as exc:
            raise CacheDirError(
                getattr(exc, "errno", None) or errno.EACCES, f"cache directory {path}: {exc}"
            ) from exc
        self.signer = Signer(secret, layout.secret)
        self.store = self._open_store(layout.store, settings.max_disk_bytes)
        self.read_only = self.store.read_only
        self.flight = self._open_flight(layout.locks)
        self.remote_off_reason = ""
        self.remote = self._open_remote(settings.remote)
        self.preload_limit = preload = settings.preload
        self._preloaders: dict[str, Preloader] = {}  # working-set name -> its preloader
        self._preload_started: set[str] = set()
        self._preload_lock = threading.Lock()
        self._forked = False
        self._host = PreloadHost(
            store=self.store,
            load_params=self.load_params,
            body_ok=self.entry_ok,
            entry_overhead=MemoryTier.ENTRY_OVERHEAD,
            on_preloaded=lambda: self.stats.add("preloaded"),
            background_error=self.background_error,
        )
        self._working_sets = WorkingSets(self._host, enabled=preload > 0 and not self.read_only)
        atexit.register(lambda: (rt := me()) and rt._at_exit())

    def _open_store(self, where: Path, max_disk_bytes: int | None) -> Any:
        """The store, read-only where it cannot be written; where it cannot be used at
        all (a newer pcache's database, a directory we may not read), none: the
        memory tier still works, and the reason is logged once."""
        from pcache import store  # JAX-free; imported here so `import pcache` stays light

        try:
            st = store.Store(where, max_bytes=max_disk_bytes, report=self._store_report)
        except (store.StoreError, OSError) as exc:
            if self.raise_errors and not isinstance(exc, store.StoreVersionError):
                raise
            logger.warning(
                "pcache: the store in %s cannot be used (%s: %s); caching in memory only",
                where,
                type(exc).__name__,
                exc,
            )
            return NoStore(max_disk_bytes, f"{type(exc).__name__}: {exc}")
        if st.read_only:
            logger.warning(
                "pcache: %s is read-only (%s): reading cached programs from it, "
                "storing none (counted as writes_skipped)",
                where,
                st.read_only_reason,
            )
        return st

    def _open_flight(self, locks_dir: Path) -> Flight | None:
        try:
            locks_dir.mkdir(mode=0o700, exist_ok=True)
        except OSError as exc:
            if not self.read_only:
                self.background_error("single-flight lock directory", exc)
            return None  # read-only: nothing is compiled into the store anyway
        return Flight(locks_dir, timeout=self.lock_timeout, stale=self.lock_stale)

    def _open_remote(self, config: Any) -> Any | None:
        """The remote tier (`pcache._remote.Remote`), or None: not configured, or
        configured without a usable fleet key (logged once, naming the variable)."""
        if config is None:
            return None
        from pcache import _remote

        try:
            key = _remote.read_fleet_key(config.secret_file)
            return _remote.Remote(config, key, report=self._remote_report)
        except Exception as exc:  # a bad fleet key, URL or namespace: local caching goes on
            self.remote_off_reason = str(exc)
            self.stats.error("remote settings")
            self.stats.add("remote_errors")
            logger.warning(
                "pcache: the remote tier %s is off (%s); caching locally only",
                _remote.redact(config.url),
                exc,
            )
            self._remote_state_file("off", str(exc), _remote.redact(config.url))
            return None

    def remote_info(self) -> dict[str, Any] | None:
        """The remote tier's URL (no password), namespace and state, for stats."""
        rem = self.remote
        if rem is None:
            cfg = self.settings.remote
            if cfg is None:
                return None
            from pcache._remote import redact

            return {"url": redact(cfg.url), "state": "off", "reason": self.remote_off_reason}
        return {
            "url": rem.url,
            "namespace": rem.config.namespace,
            "prefix": rem.prefix,
            "key_id": rem.key_id,
            **rem.info(),  # state, reason, failures, retry_in, slow_for, round_trip_ms
        }

    def _remote_state_file(self, state: str, reason: str, url: str = "") -> None:
        """Record a change of the remote tier's state in the cache directory, for
        `pcache stats` (the last change any process of this directory saw)."""
        import json

        from pcache._remote import STATE_FILE

        rem = getattr(self, "remote", None)
        data = {
            "state": state,
            "reason": reason[:500],
            "url": url or (rem.url if rem is not None else ""),
            "pid": os.getpid(),
            "time": time.time(),
        }
        if rem is not None:
            data.update(rem.info())
            data["state"] = state
        path = self.path / STATE_FILE
        tmp = path.with_name(f".{STATE_FILE}.{os.getpid()}.{threading.get_ident()}")
        try:
            tmp.write_text(json.dumps(data))
            os.replace(tmp, path)
        except OSError as exc:  # a read-only directory: stats just do not show it
            logger.debug("pcache: %s: %s", path, exc)
            with contextlib.suppress(OSError):
                tmp.unlink()

    def _remote_report(self, what: str, cause: str, exc: BaseException | None) -> None:
        """What the remote tier reports: a failed command (it is off, or read-only
        when full, from now on) or a failed writer job. Counted and logged once per
        cause; never raised (it may come from the writer thread)."""
        rem = getattr(self, "remote", None)
        if cause == "remote recovered":  # not an error: the breaker closed again
            self.stats.add("remote_recoveries")
            self._bump({"remote_recoveries": 1})
            logger.info("pcache: the remote tier %s answers again (%s)", rem and rem.url, exc)
            self._remote_state_file("on", f"recovered {exc}")
            return
        self.stats.add("remote_errors")
        self.stats.error(cause)
        self._bump({"remote_errors": 1})
        if cause == "remote full":
            message = (
                "pcache: the remote tier %s is full (%s: %s); reading from it only for the "
                "rest of this process"
            )
            self._remote_state_file("read-only", f"full: {exc}")
        elif cause == "remote unavailable":
            self.stats.add("remote_breaker_opens")
            self._bump({"remote_breaker_opens": 1})
            message = (
                "pcache: the remote tier %s failed (%s: %s); it is off until it answers again "
                "(retried after a pause that grows while it fails), the local cache keeps "
                "working"
            )
            self._remote_state_file("open", rem.state_reason if rem else str(exc))
        elif cause == "remote slow":
            self.stats.add("remote_slow_skips")
            self._bump({"remote_slow_skips": 1})
            message = "pcache: the remote tier %s is too slow to pay off (%s: %s)"
            self._remote_state_file("slow", str(exc))
        elif cause in ("remote lease forged", "remote wrong type"):
            message = (
                "pcache: the remote tier %s holds keys pcache did not write (%s: %s); "
                "someone else writes this Redis"
            )
        else:
            self._log_once(
                cause,
                exc or RuntimeError(what),
                "pcache: %s failed (%s: %s); the cache itself is unaffected",
            )
            return
        tag = f"{cause}:"
        with self._warn_lock:
            first = tag not in self._warned
            self._warned.add(tag)
        (logger.warning if first else logger.debug)(
            message, rem.url if rem else "?", type(exc).__name__, exc
        )

    def _remote_error(self, cause: str, exc: BaseException) -> None:
        """A failure of pcache's own around the remote tier (not the server's)."""
        self.stats.add("remote_errors")
        self._bump({"remote_errors": 1})
        self.error(cause, exc)

    def _reset_locks_after_fork(self) -> None:
        # The preload threads and the save timer do not exist in the child. A child
        # neither preloads nor saves working sets: it would start the parent's
        # previous run over again and overwrite the program's set with its few keys.
        self._forked = True
        self._preloaders = {}
        self._preload_lock = threading.Lock()
        self._working_sets = WorkingSets(getattr(self, "_host", None), enabled=False)
        self._warn_lock = threading.Lock()
        self._inflight = {}
        self._inflight_lock = threading.Lock()
        self.memory._lock = threading.Lock()
        self.stats._lock = threading.Lock()
        if getattr(self, "flight", None) is not None:
            self.flight.after_fork()

    def _at_exit(self, join_timeout: float | None = None) -> None:
        # Before JAX's own exit hooks (atexit runs last-registered first): a preload
        # thread must not be inside the backend while it is torn down, so at exit we
        # wait for the one load in flight however long it takes.
        preloaders = list(self._preloaders.values())
        for pre in preloaders:
            pre.stop(wait=False)
        for pre in preloaders:
            pre.stop(timeout=join_timeout)
        self._working_sets.save()
        rem = getattr(self, "remote", None)
        if rem is not None:  # a forked child flushes its own writes (and leases)
            bound = max(30.0, 10 * rem.config.timeout)
            if not rem.flush(bound):
                self.background_error(
                    "remote write at exit",
                    TimeoutError(f"writes to {rem.url} still pending after {bound:.0f} s"),
                )

    def save_working_sets(self) -> None:
        """Write this run's working sets now (they are saved shortly after they grow,
        and at exit)."""
        self._working_sets.save()

    def close(self) -> None:
        self._at_exit(join_timeout=10.0)
        self.release_preloaded()
        self.memory.clear()
        if self.remote is not None:
            self.remote.close()
        try:
            self.store.close()
        except Exception as exc:  # closing must not break interpreter shutdown
            self.error("close", exc)

    # -- error policy ---------------------------------------------------------

    def error(self, cause: str, exc: BaseException) -> None:
        """A cache failure: count it, log it once per cause, or raise in test mode.

        A log record, never a warning: under ``-W error`` (pytest's
        ``filterwarnings = error``) a warning would become an exception inside the
        user's jit call, and a cache failure must only ever cost a compile.
        """
        self.stats.error(cause)
        _record_event("/pcache/errors")
        if self.raise_errors:
            raise exc
        self._log_once(
            cause,
            exc,
            "pcache: %s failed (%s: %s); compiling normally. Further failures of this "
            "kind are counted in pcache.stats() and logged at DEBUG.",
        )

    def background_error(self, cause: str, exc: BaseException) -> None:
        """A failure on a helper thread or at exit: counted and logged once per cause,
        never raised (not even with ``raise_errors``: nobody joins that thread)."""
        self.stats.error(cause)
        self._log_once(cause, exc, "pcache: %s failed (%s: %s); the cache itself is unaffected")

    def _store_report(self, message: str, category: type[Warning], cause: str) -> None:
        """What the store reports (damage it found and removed): logged once per
        cause, like any other cache failure, never warned inside a user's call."""
        if category.__name__ == "StoreCorruptionWarning" and cause != "database":
            cause = "damaged entry"  # however the store found it: one cause to the user
        self.stats.error(cause)
        tag = f"store:{cause}"
        with self._warn_lock:
            first = tag not in self._warned
            self._warned.add(tag)
        (logger.warning if first else logger.debug)("%s", message)

    def _log_once(self, cause: str, exc: BaseException, message: str) -> None:
        tag = f"{cause}:{type(exc).__name__}"
        with self._warn_lock:
            first = tag not in self._warned
            self._warned.add(tag)
        log = logger.warning if first else logger.debug
        log(message, cause, type(exc).__name__, exc)

    def bypass(self, reason: str, detail: str = "") -> None:
        """A program pcache cannot identify: compiled normally, every time. Counted
        here and in the store (``bypass:<reason>``, what `pcache stats` lists)."""
        self.stats.bypass(reason)
        _record_event("/pcache/bypasses")
        self._bump({f"{BYPASS_PREFIX}{reason}": 1})
        if self.explain and self._first(f"explain-bypass:{reason}"):
            logger.warning("pcache: never cached (%s): %s", reason, detail)
        else:
            logger.debug("pcache: bypass (%s) %s", reason, detail)

    def nonpersistent(self, key: CacheKey) -> None:
        """A program whose key is valid in this process only (host callbacks, user
        lowering rules): compiled into the memory tier, never stored. Counted here
        and in the store (``nonpersistent:<why>``)."""
        why = key.local_why or "process-local"
        self.stats.nonpersistent(why)
        _record_event("/pcache/nonpersistent")
        self._bump({f"{NONPERSISTENT_PREFIX}{why}": 1})
        logger.debug("pcache: %s is memory-only (%s)", key.digest[:12], why)

    def _first(self, tag: str) -> bool:
        with self._warn_lock:
            first = tag not in self._warned
            self._warned.add(tag)
        return first

    # -- signing --------------------------------------------------------------

    def entry_ok(self, key: str, value: bytes, extra: dict[str, Any]) -> bool:
        """Whether ``value`` and the signed part of ``extra`` were written by a holder
        of this cache's secret."""
        try:
            self.signer.check(key, value, extra)
        except IntegrityError:
            return False
        return True

    def load_params(self, key: str, entry: Any) -> Any | None:
        """An entry's load parameters, if its signed head is pcache's own; else None
        (the preloader reads nothing more of it)."""
        try:
            self.signer.admit(key, entry.raw_size, entry.extra)
        except PcacheError:
            return None
        return entry.extra.get("load")

    # -- lookups --------------------------------------------------------------

    def lookup(
        self,
        key: CacheKey,
        load: LoadFn,
        accept: Callable[[Any], bool] | None = None,
        working_set: str | None = None,
    ) -> Any | None:
        """Memory tier, then what a preload thread loaded, then the store.

        Returns a ready executable or None. ``accept(signature)`` is asked about a
        preloaded executable: whether it was loaded the way ``load`` would load it.
        A persistent key that hits is recorded in the working set ``working_set``.
        """
        digest = key.digest
        exe = self.memory_lookup(digest)
        if exe is not None:
            if key.persistent and working_set is not None:
                self._working_sets.add(working_set, digest)
            return exe
        if not key.persistent:
            return None
        exe = self._take_preloaded(key, accept)
        if exe is None:
            exe = self._load_from_store(key, load)
        if exe is not None:
            self._remote_offer(digest)
        else:
            self.stats.add("local_misses")
            if self.remote is not None:
                exe, _ = self._load_from_remote(key.digest, load, key)
        if exe is not None and working_set is not None:
            self._working_sets.add(working_set, digest)
        return exe

    def memory_lookup(self, digest: str, pick: Callable[[Any], Any] | None = None) -> Any | None:
        """The memory tier's value for ``digest`` (or what ``pick`` takes of it),
        counted as a memory hit when there is one."""
        value = self.memory.get(digest)
        if value is not None and pick is not None:
            value = pick(value)
        if value is not None:
            self.stats.add("memory_hits")
            _record_event("/pcache/memory_hits")
        return value

    # -- preloading a program's working set ------------------------------------

    def preload_pending(self, name: str) -> bool:
        """True until the first persistent lookup of working set ``name`` (one per
        program and backend) has started its preload."""
        return self.preload_limit > 0 and not self._forked and name not in self._preload_started

    def start_preload(
        self, name: str, current: str, usable: Callable[[Any], bool], load: PreloadFn
    ) -> None:
        """Once per working set: read what the previous run of this program used on
        this backend and start loading it on a background thread (``current`` is
        being looked up right now).

        ``usable(params)`` says whether an entry with these stored load parameters
        was written for this backend and environment; ``load(raw, params)``
        deserializes one and returns ``(executable, signature)`` (or None). Both run
        off the main thread.
        """
        with self._preload_lock:
            if not self.preload_pending(name):
                return
            self._preload_started.add(name)
            try:
                previous = self.store.key_set(name)
            except Exception as exc:
                self.background_error("store read (working set)", exc)
                return
            self._working_sets.set_previous(name, previous)
            digests = [d for d in previous if d != current][: self.preload_limit]
            if self.preload_limit <= 0 or not digests:
                return
            pre = Preloader(self._host, digests, usable, load, self.memory.max_bytes // 2)
            self._preloaders[name] = pre
        pre.start()

    def clear_memory(self) -> None:
        """Empty the memory tier and drop preloads nobody has asked for."""
        self.memory.clear()
        self.release_preloaded()

    def release_preloaded(self) -> None:
        """Drop preloaded executables nobody has asked for (``clear_memory``)."""
        for pre in list(self._preloaders.values()):
            pre.release()

    def _take_preloaded(self, key: CacheKey, accept: Callable[[Any], bool] | None) -> Any | None:
        digest = key.digest
        got = None
        for pre in list(self._preloaders.values()):
            got = pre.take(digest)
            if got is not None:
                break
        if got is None:
            return None
        exe, signature, entry, nbytes = got
        self._check_key_parts(key, entry)
        if accept is not None and not accept(signature):
            # Loaded with other compile options or devices than this lookup predicts
            # (the digest covers them, so only a stale or foreign entry gets here).
            self.bypass("preload-mismatch", digest[:12])
            return None
        self.stats.add("disk_hits")
        self.stats.add("preload_hits")
        self.stats.add("bytes_read", nbytes)
        saved = entry.compile_seconds or 0.0
        self.stats.add("seconds_saved", saved)
        _record_event("/pcache/disk_hits")
        _record_event("/pcache/preload_hits")
        self._bump({"seconds_saved": saved, "preload_hits": 1})
        try:
            self.store.touch(digest)
        except Exception as exc:
            self.error("store counters", exc)
        self._memory_put(digest, exe, nbytes)
        return exe

    def _read_verified(self, digest: str, load: LoadFn):
        """Read an entry, check its signed head before any value byte is read, then
        its HMAC, and ``load`` it (with its signed replay record).

        Returns ``(loaded, raw, entry)``, or None on a miss or any failure (a bad
        entry is counted, logged once per cause, and removed).
        """

        def admit(entry: Any) -> None:
            self.signer.admit(digest, entry.raw_size, entry.extra)

        try:
            # The HMAC below covers every byte: the store's own checksum would hash
            # them a second time (~5 ms per 10 MB).
            got = self.store.get_entry(digest, verify=False, admit=admit)
        except StaleEntryError as exc:  # another pcache's format: overwritten on compile
            logger.debug("pcache: %s", exc)
            return None
        except IntegrityError as exc:
            self.error("load entry", exc)
            self._drop(digest)
            return None
        except Exception as exc:
            self.error("store read", exc)
            return None
        if got is None:
            return None
        raw, entry = got
        try:
            try:
                self.signer.check(digest, raw, entry.extra)
            except IntegrityError:
                # Damaged bytes fail the HMAC too; say which it is.
                from pcache.store import StoreCorruptionWarning, checksum_matches

                if not checksum_matches(raw, entry.checksum):
                    self._store_report(
                        f"pcache: entry {digest[:12]} does not match its checksum (damaged "
                        "on disk); removed, compiling normally",
                        StoreCorruptionWarning,
                        "checksum",
                    )
                    if self.raise_errors:
                        raise CorruptEntryError(
                            f"entry {digest[:12]} does not match its checksum"
                        ) from None
                    self._drop(digest)
                    return None
                raise
            loaded = load(raw, entry.extra.get("replay"))
        except Exception as exc:
            self.error("load entry", exc)
            self._drop(digest)
            return None
        self.stats.add("bytes_read", len(raw))
        return loaded, raw, entry

    def _write(self, digest: str, raw: bytes, meta: dict[str, Any], **extra: Any) -> bool:
        """Store ``raw`` under ``digest``, signed; False if not stored."""
        if self.read_only:
            self.stats.add("writes_skipped")
            return False
        meta = dict(meta)
        sealed = self.signer.seal(digest, raw, {**meta.pop("extra", {}), **extra})
        try:
            self.store.put(digest, raw, meta={**meta, "extra": sealed})
        except Exception as exc:
            self.error("store write", exc)
            return False
        self.stats.add("bytes_written", len(raw))
        return True

    def _load_from_store(self, key: CacheKey, load: LoadFn) -> Any | None:
        digest = key.digest
        t0 = time.perf_counter()
        got = self._read_verified(digest, load)
        if got is None:
            return None
        exe, raw, entry = got
        self._check_key_parts(key, entry)
        load_s = time.perf_counter() - t0
        self.stats.add("disk_hits")
        saved = max(0.0, (entry.compile_seconds or 0.0) - load_s)
        self.stats.add("seconds_saved", saved)
        _record_event("/pcache/disk_hits")
        _record_duration("/pcache/load_time_sec", load_s)
        self._bump({"seconds_saved": saved})
        self._memory_put(digest, exe, len(raw))
        return exe

    # -- the remote tier ------------------------------------------------------

    def _load_from_remote(
        self, digest: str, load: LoadFn, key: CacheKey | None = None, recheck: bool = False
    ) -> tuple[Any | None, str]:
        """The remote tier's entry ``digest``, verified, loaded and copied into the
        local store; or ``(None, why)`` (missing, incomplete, tampered, unloadable).
        ``recheck``: the lookup before already counted it missing."""
        rem = self.remote
        if rem is None or not rem.readable:
            return None, "off"
        t0 = time.perf_counter()
        try:
            got = rem.get(digest)
        except Exception as exc:
            self._remote_error("remote read", exc)
            return None, "error"
        if got.raw is None:
            if not recheck:  # the second look of one miss is not counted again
                self.stats.remote_miss(got.miss)
                self._bump({"remote_misses": 1})
                if got.miss == "missing" and self._first("remote other keys"):
                    rem.submit(lambda: self._check_other_keys(rem))  # off the critical path
            if got.miss == "tampered":
                self._remote_report_entry("remote entry signature", got.detail, count=not recheck)
            return None, got.miss
        head = got.head
        try:
            if key is not None:
                self._check_key_parts(key, head)
            exe = load(got.raw, head.extra.get("replay"))
        except CheckError:
            raise
        except Exception as exc:
            self._remote_error("remote load", exc)
            rem.note_unusable(digest)  # waiters wait for its replacement, not for it
            return None, "unloadable"
        load_s = time.perf_counter() - t0
        n = len(got.raw)
        try:
            compile_s = float(head.meta.get("compile_seconds") or 0.0)
        except (TypeError, ValueError):
            compile_s = 0.0
        saved = max(0.0, compile_s - load_s)
        rem.note_compile(compile_s)
        self.stats.add("remote_hits")
        self.stats.add("remote_bytes_read", n)
        self.stats.add("seconds_saved", saved)
        _record_event("/pcache/remote_hits")
        self._bump({"remote_hits": 1, "remote_bytes_read": n, "seconds_saved": saved})
        if key is not None:
            self._memory_put(digest, exe, n)
        meta = {k: v for k, v in head.meta.items() if k in _META_KEYS}
        raw = got.raw
        # The local copy is written by the writer thread, off the critical path.
        rem.submit(lambda: self._write(digest, raw, {**meta, "extra": dict(head.extra)}))
        return exe, ""

    def _remote_report_entry(self, cause: str, detail: str, count: bool = True) -> None:
        """A remote entry this host will not load: counted, logged once per cause."""
        if count:
            self.stats.add("remote_errors")
            self.stats.error(cause)
            self._bump({"remote_errors": 1})
        text = (
            "pcache: a remote entry failed verification (%s): it was written without "
            "the fleet key or altered; not loaded, compiling here and replacing it"
        )
        (logger.warning if self._first(f"{cause}:") else logger.debug)(text, detail)

    def _check_other_keys(self, rem: Any) -> None:
        """Once per process, at the first remote miss: say so if hosts with other
        fleet keys write this namespace (their entries are invisible here)."""
        try:
            others, bad = rem.other_keys()
        except Exception as exc:
            self._remote_error("remote read", exc)
            return
        if bad:  # not written by pcache: shown quoted and cut (`_remote._quote`)
            self.stats.error("remote key ids")
            logger.warning(
                "pcache: the remote namespace %r holds key ids pcache never writes (%s); "
                "ignored. Someone else writes this Redis.",
                rem.config.namespace,
                ", ".join(bad),
            )
        if others:
            self.stats.error("remote fleet key")
            logger.warning(
                "pcache: the remote namespace %r is also written by hosts with other fleet "
                "keys (key ids %s; this host's key: %s). Hosts share entries only with "
                "hosts that hold the same key: check JAX_PCACHE_REMOTE_SECRET_FILE if this "
                "host should share with them.",
                rem.config.namespace,
                ", ".join(others[:5]),
                rem.key_id,
            )

    def _remote_claim(self, digest: str, wait: float | None = None) -> Any | None:
        """The fleet-wide lease for ``digest`` (`pcache._remote.Lease`), after waiting
        (at most ``wait`` seconds) for a live holder on another host; None without
        a remote."""
        rem = self.remote
        if rem is None or not rem.readable:
            return None
        try:
            lease = rem.claim(digest, wait)
        except Exception as exc:
            self._remote_error("remote lease", exc)
            return None
        if lease.waited:
            self.stats.add("remote_lease_waits")
        if lease.took_over:
            self.stats.add("remote_takeovers")
        if lease.outcome == "timeout":
            self._remote_error(
                "remote lease",
                TimeoutError(
                    f"the host compiling {digest[:12]} has not stored it in "
                    f"{rem.config.wait:.0f} s; compiling it here too"
                ),
            )
        return lease

    def _remote_put(
        self, digest: str, raw: bytes, meta: dict[str, Any], lease: Any, miss: str
    ) -> None:
        """Write a compiled entry to the remote tier on its writer thread, then
        release ``lease`` (other hosts wait for the entry, not for the release)."""
        rem = self.remote
        if rem is None:
            return
        if not rem.writable:
            if lease is not None:
                rem.submit(lambda: self._remote_release(lease))
            return

        def job() -> None:
            n = None
            try:
                n = rem.put(
                    digest, raw, meta, replace=miss in ("tampered", "incomplete", "unloadable")
                )
                if n:
                    self.stats.add("remote_writes")
                    self.stats.add("remote_bytes_written", n)
                    self._bump({"remote_writes": 1, "remote_bytes_written": n})
            except Exception as exc:
                self.stats.add("remote_errors")
                self.background_error("remote write", exc)
            finally:
                if lease is not None:
                    self._remote_release(lease, stored=n is not None)

        rem.submit(job)

    def _remote_offer(self, digest: str) -> None:
        """A local hit: if the remote lacks the entry (a new or flushed remote, one
        that was down when it was compiled), upload it, on the writer thread (once
        per entry and process, rate-limited: `pcache._remote.Remote.offer`)."""
        rem = self.remote
        if rem is None or self._forked or not rem.offer(digest):
            return

        def job() -> None:
            if rem.exists(digest) is not False:
                return  # there, or the remote cannot tell now
            try:
                n = self.upload(digest)
            except Exception as exc:
                self.stats.add("remote_errors")
                self.background_error("remote upload", exc)
                return
            if n:
                self.stats.add("remote_uploads")
                self._bump({"remote_uploads": 1})

        rem.submit(job)

    def upload(self, digest: str, replace: bool = False) -> int | None:
        """Write the local entry ``digest`` (verified with this directory's secret)
        to the remote: bytes sent, 0 if it was there, None if not written (no such
        local entry, one that fails its HMAC, a remote that cannot take it). Runs
        on the caller's thread (`pcache remote push`, the writer thread)."""
        rem = self.remote
        if rem is None:
            return None

        def admit(entry: Any) -> None:
            self.signer.admit(digest, entry.raw_size, entry.extra)

        try:  # not a hit of this program's: counted nowhere
            got = self.store.get_entry(digest, verify=False, admit=admit, touch=False)
        except PcacheError:
            return None  # another format, or not this directory's: never uploaded
        if got is None:
            return None
        raw, entry = got
        if not self.entry_ok(digest, raw, entry.extra):
            return None
        meta: dict[str, Any] = {k: getattr(entry, k, None) for k in _META_KEYS}
        meta = {k: v for k, v in meta.items() if v not in (None, "")}
        n = rem.put(digest, raw, {**meta, "extra": dict(entry.extra)}, replace=replace)
        if n:
            self.stats.add("remote_writes")
            self.stats.add("remote_bytes_written", n)
            self._bump({"remote_writes": 1, "remote_bytes_written": n})
        return n

    def _remote_release(self, lease: Any, stored: bool = False) -> None:
        """Release ``lease``; not ``stored``: waiters compile at once (no entry is
        coming from this host)."""
        try:
            self.remote.release(lease, stored)
        except Exception as exc:
            self.stats.add("remote_errors")
            self.background_error("remote lease", exc)

    def _check_key_parts(self, key: CacheKey, entry) -> None:
        """``JAX_PCACHE_CHECK``: an entry loaded for ``key`` was stored under the same
        key parts as this lookup computed (from scratch, in that mode)."""
        if not self.check_mode:
            return
        stored = entry.extra.get("key_parts")
        if stored is not None and [tuple(p) for p in stored] != list(key.parts):
            raise CheckError(
                f"entry {key.digest[:12]} was stored under key parts {stored}, this "
                f"lookup computed {list(key.parts)}"
            )

    def _stored(self, digest: str) -> bool:
        try:
            return digest in self.store
        except Exception as exc:
            self.error("store read", exc)
            return False

    def _drop(self, digest: str) -> None:
        if self.read_only:
            return
        try:
            self.store.delete(digest)
        except Exception as exc:
            self.error("store delete", exc)

    def _bump(self, counters: dict[str, float]) -> None:
        try:
            self.store.bump(counters)
        except Exception as exc:
            self.error("store counters", exc)

    def _memory_put(self, digest: str, exe: Any, nbytes: int) -> None:
        evicted = self.memory.put(digest, exe, nbytes)
        if evicted:
            self.stats.add("evictions", evicted)

    # -- the miss path --------------------------------------------------------

    def compile_through(
        self,
        key: CacheKey,
        compile_fn: Callable[[], Compiled],
        load: LoadFn,
        meta: dict[str, Any],
        accept: Callable[[Any], bool] | None = None,
        working_set: str | None = None,
    ) -> Any:
        """Compile on a miss, with single-flight across threads and processes.

        If another process is compiling the same key, wait for it (bounded by
        ``lock_timeout``) and load its result; if it dies, its lock is released by
        the OS and this process takes over.
        """
        digest = key.digest
        self.stats.add("misses")  # the store persists its own hit/miss counters
        _record_event("/pcache/misses")
        with self._thread_lock(digest):
            exe = self.memory_lookup(digest)
            if exe is not None:  # another thread of this process just compiled it
                return exe
            if not key.persistent:
                self.nonpersistent(key)
                return self._compile_and_fill(key, compile_fn, meta)[0]
            if working_set is not None:
                self._working_sets.add(working_set, digest)
            exe = self._take_preloaded(key, accept)
            if exe is not None:  # e.g. AOT .compile(compiler_options=...) keyed anew
                return exe
            started = time.monotonic()  # one bound for the local and the remote wait
            ticket = self._claim(digest)
            try:
                # Whoever held the lock before us has probably stored the result;
                # one indexed read is nothing next to a compile. (`in` first: the
                # lookup before the lock already counted this miss in the store.)
                if ticket is not None and self._stored(digest):
                    exe = self._load_from_store(key, load)
                    if exe is not None:
                        return exe
                exe, stored = self._fleet_compile(
                    digest,
                    lambda lease, miss: self._compile_and_fill(key, compile_fn, meta, lease, miss),
                    lambda: self._load_from_remote(digest, load, key, recheck=True),
                    started,
                )
                if stored and ticket is not None:
                    ticket.done()
                return exe
            finally:
                if ticket is not None:
                    ticket.release()

    def _fleet_compile(
        self,
        digest: str,
        compile_and_fill: Callable[[Any, str], tuple[Any, bool]],
        from_remote: Callable[[], tuple[Any | None, str]],
        started: float,
    ) -> tuple[Any, bool]:
        """Compile ``digest`` once for the fleet: take its remote lease (or wait for
        the host holding it and load what it stored), compile, and hand the lease
        to the remote write. ``compile_and_fill(lease, why_missed)`` compiles and
        fills the tiers; returns (value, stored locally). The wait for another host
        ends ``lock_timeout`` after ``started`` (when the wait for the local lock
        began)."""
        if self.remote is None:
            return compile_and_fill(None, "")
        lease = self._remote_claim(digest, self.lock_timeout - (time.monotonic() - started))
        handed = False
        try:
            miss = "missing"
            if lease is not None and lease.outcome != "off":
                # Held: whoever held it before stored the entry, or nobody did.
                value, miss = from_remote()
                if value is not None:
                    return value, True
            handed = lease is not None and lease.held
            return compile_and_fill(lease if handed else None, miss)
        finally:
            if lease is not None and lease.held and not handed:
                self._remote_release(lease)

    def _claim(self, digest: str) -> Any | None:
        """The single-flight ticket for ``digest`` (`_flight.Ticket`), after waiting
        for a live holder; None where nothing is stored (read-only, no lock dir)."""
        if self.read_only or self.flight is None:
            return None
        ticket = self.flight.claim(digest)
        if ticket.waited:
            self.stats.add("lock_waits")
        if ticket.outcome == "error":
            self.error("single-flight lock", ticket.error)
        elif ticket.outcome in ("timeout", "stale"):
            self.error(
                "single-flight lock",
                TimeoutError(
                    f"the process compiling {digest[:12]} "
                    + (
                        f"has not finished in {self.lock_timeout:.0f} s"
                        if ticket.outcome == "timeout"
                        else f"stopped beating for {self.lock_stale:.0f} s (stopped or hung)"
                    )
                    + "; compiling it here too"
                ),
            )
        return ticket

    def _compile_and_fill(
        self,
        key: CacheKey,
        compile_fn: Callable[[], Compiled],
        meta: dict[str, Any],
        lease: Any = None,
        remote_miss: str = "",
    ) -> tuple[Any, bool]:
        """Compile, fill the tiers; returns (executable, whether it was stored
        locally). ``lease``: the remote lease, released once the remote write is
        done (or at once if nothing is written)."""
        digest = key.digest
        try:
            compiled = compile_fn()
        except BaseException:
            if lease is not None:
                self._remote_release(lease)
            raise
        self.stats.add("compiles")
        if self.remote is not None:
            self.remote.note_compile(compiled.compile_seconds)
        nbytes = len(compiled.serialized) if compiled.serialized is not None else 1 << 20
        if compiled.keep_in_memory:
            kept = compiled.executable if compiled.memory_value is None else compiled.memory_value
            self._memory_put(digest, kept, nbytes)
        if key.persistent and compiled.serialized is not None:
            meta = {**meta, "compile_seconds": compiled.compile_seconds}
            key_parts = [list(p) for p in key.parts]
            stored = self._write(digest, compiled.serialized, meta, key_parts=key_parts)
            if self.remote is not None:
                full = {**meta, "extra": {**meta.get("extra", {}), "key_parts": key_parts}}
                self._remote_put(digest, compiled.serialized, full, lease, remote_miss)
            return compiled.executable, stored
        if lease is not None:
            self._remote_release(lease)
        return compiled.executable, False

    def _thread_lock(self, digest: str) -> _KeyedLock:
        return _KeyedLock(self, digest)

    # -- JAX's HLO-level cache interface (pmap, eager, what the jit seam misses) --

    def hlo_get(self, key: str, load: Callable[[bytes], Any]) -> Any | None:
        """The executable stored for JAX's cache key ``key``, loaded by ``load``
        (an entry that fails to load is dropped: a local one removed, a remote
        one never copied here); None on a miss."""
        digest = "hlo-" + key
        got = self._read_verified(digest, lambda raw, _replay: load(raw))
        exe = None if got is None else got[0]
        if exe is not None:
            self._remote_offer(digest)
        if exe is None and self.remote is not None:
            exe, _ = self._load_from_remote(digest, lambda raw, _replay: load(raw))
        self.stats.add("hlo_hits" if exe is not None else "hlo_misses")
        return exe

    def hlo_put(self, key: str, value: bytes, meta: dict[str, Any]) -> None:
        digest = "hlo-" + key
        self._write(digest, value, meta, seam="hlo")
        if self.remote is not None:
            full = {**meta, "extra": {**meta.get("extra", {}), "seam": "hlo"}}
            self._remote_put(digest, value, full, None, "")

    def hlo_compile_through(
        self,
        key: str,
        compile_fn: Callable[[], tuple[Any, bytes | None]],
        load: Callable[[bytes], Any],
        meta: Callable[[], dict[str, Any]],
    ) -> Any:
        """A miss of the HLO-level seam, with single-flight across threads, processes
        and hosts as for the jit seam: whoever holds the key's lock compiles and
        stores (``compile_fn() -> (executable, bytes or None)``); the others wait
        and ``load`` what it stored."""
        digest = "hlo-" + key
        # JAX's key starts with the module's name: the lock file is named by a hash.
        lock_name = "hlo-" + hashlib.sha256(key.encode()).hexdigest()
        with self._thread_lock(digest):
            started = time.monotonic()
            ticket = self._claim(lock_name)
            try:
                if self._stored(digest):  # stored while we waited (or by another thread)
                    got = self._read_verified(digest, lambda raw, _replay: load(raw))
                    if got is not None:
                        self.stats.add("hlo_hits")
                        return got[0]

                def compile_and_fill(lease: Any, miss: str) -> tuple[Any, bool]:
                    try:
                        # A compile error is the program's: it propagates.
                        exe, raw = compile_fn()
                    except BaseException:
                        if lease is not None:
                            self._remote_release(lease)
                        raise
                    self.stats.add("hlo_compiles")
                    try:
                        entry_meta = meta() if raw is not None else None
                    except Exception as exc:
                        self.error("hlo store", exc)
                        entry_meta = None
                    stored = entry_meta is not None and self._write(
                        digest, raw, entry_meta, seam="hlo"
                    )
                    if entry_meta is not None and self.remote is not None:
                        extra = {**entry_meta.get("extra", {}), "seam": "hlo"}
                        self._remote_put(digest, raw, {**entry_meta, "extra": extra}, lease, miss)
                    elif lease is not None:
                        self._remote_release(lease)
                    return exe, stored

                def from_remote() -> tuple[Any | None, str]:
                    exe, why = self._load_from_remote(
                        digest, lambda raw, _replay: load(raw), recheck=True
                    )
                    if exe is not None:
                        self.stats.add("hlo_hits")
                    return exe, why

                exe, stored = self._fleet_compile(digest, compile_and_fill, from_remote, started)
                if stored and ticket is not None:
                    ticket.done()
                return exe
            finally:
                if ticket is not None:
                    ticket.release()


class _KeyedLock:
    """A per-key threading lock, dropped from the table when nobody holds it."""

    def __init__(self, rt: Runtime, digest: str) -> None:
        self.rt, self.digest = rt, digest

    def __enter__(self) -> None:
        with self.rt._inflight_lock:
            lk = self.rt._inflight.setdefault(self.digest, threading.Lock())
        lk.acquire()
        self._lk = lk

    def __exit__(self, *exc: object) -> None:
        self._lk.release()
        with self.rt._inflight_lock:
            if not self._lk.locked():
                self.rt._inflight.pop(self.digest, None)


# ------------------------------------------------------------------- helpers


def _make_private_dir(path: Path) -> None:
    path.mkdir(mode=0o700, parents=True, exist_ok=True)


_UNTRUSTED_WARNED: set[Path] = set()


def _warn_if_untrusted(path: Path) -> None:
    """Log once per directory when others may write it. A cache directory is
    trusted: its secret keeps planted executables out, but whoever may write it can
    delete, fill or lock it (JAX's and ccache's documentation say the same)."""
    if path in _UNTRUSTED_WARNED:
        return
    why = _config.untrusted_reasons(path)
    if why:
        _UNTRUSTED_WARNED.add(path)
        logger.warning(
            "pcache: cache directory %s is %s: whoever may write it can delete or fill the "
            "cache (not plant programs: entries are signed). Use a directory only you "
            "can write.",
            path,
            " and ".join(why),
        )


class NoStore:
    """Stands in for a store that cannot be used at all: every read misses, nothing
    is written (the memory tier still works)."""

    read_only = True

    def __init__(self, max_bytes: int | None, reason: str) -> None:
        self.max_bytes = max_bytes
        self.read_only_reason = reason

    def get_entry(self, key: str, **kw: Any) -> None:
        return None

    def entry(self, key: str) -> None:
        return None

    def entries(self, **kw: Any) -> Iterator[Any]:
        return iter(())

    def __contains__(self, key: object) -> bool:
        return False

    def key_set(self, name: str) -> list[str]:
        return []

    def touch(self, key: str) -> None:
        pass

    def bump(self, counters: dict[str, float]) -> None:
        pass

    def release_connection(self) -> None:
        pass

    def close(self) -> None:
        pass


def _record_event(name: str) -> None:
    jax.monitoring.record_event(name)


def _record_duration(name: str, secs: float) -> None:
    jax.monitoring.record_event_duration_secs(name, secs)
