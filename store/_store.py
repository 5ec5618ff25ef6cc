"""The Store: SQLite rows, transactions, coalesced bookkeeping, eviction, gc.

Values are framed by :mod:`store._codec` and kept inline (table ``blobs``) or in
side files (:mod:`store._sidefiles`) depending on their stored size.

Inline vs side file.  SQLite's own guidance ("Internal Versus External BLOBs")
puts the break-even near 100 KB.  Measured here (2 cores, ext4 on virtio, fsync
~2-4 ms; ``scripts/bench_store.py``, incompressible values, p50 ms):

    stored size  get inline  get file  put inline  put file
    16 KiB       0.023       0.029     0.083       3.96
    64 KiB       0.064       0.066     0.176       3.10
    128 KiB      0.121       0.119     0.283       2.96
    256 KiB      0.271       0.201     0.611       3.96
    1 MiB        0.990       0.770     3.885       9.13
    4 MiB        4.446       3.810     32.25       15.58

Gets from side files win from ~256 KiB.  Puts to side files pay an fsync
(needed: the file must be durable before the row naming it commits), which
dominates below ~1 MiB; above that inline puts lose (the WAL writes every byte
twice, and big blobs make the WAL and VACUUM heavy).  Puts follow a compile
that took seconds, gets are what users wait for, so the default
``inline_threshold`` is 256 KiB of stored (compressed) bytes.  mmap_size was
tried and changed nothing measurable; it is left off.

Concurrency.  One connection per thread (thread-local) and per process: a
connection is reopened when ``os.getpid()`` changes, and connections
inherited over fork are abandoned, never closed or used.  Writes run in
``BEGIN IMMEDIATE`` and are retried with backoff until a deadline
(``busy_timeout``), then raise StoreLockedError.  sqlite3's ``timeout=``
alone is not trusted because (a) SQLite returns SQLITE_BUSY without calling
the busy handler in several cases (WAL recovery, BUSY_SNAPSHOT, a read
transaction that must upgrade, "schema is locked"), and (b) the handler's
timeout applies per statement, so an operation of several statements could
wait several times ``timeout``.  Our loop gives one deadline per operation.
The file lock ``store.lock`` (filelock) is used only where SQLite cannot
serialize: schema creation/migration and gc (orphan sweeping, vacuum).

Faults.  Nothing a row says is trusted: every value read is type- and
range-checked (a bad row is a corrupt entry, removed), no value claiming more
than ``max_value_size`` is read, a side file or inline blob is read only when its
size is the recorded one, and a zstd frame whose header claims another size than
the row is refused before anything is inflated.  Corrupt entries are reported
once per cause.  A database SQLite calls corrupt (confirmed by ``quick_check``)
is moved aside as ``store.db.damaged-*`` and replaced by an empty one, unless
``repair=False``; a newer schema is never touched.  A store that cannot be
written (a read-only mount, a full disk) opens read-only: gets work, writes
raise StoreReadOnlyError, hits are not counted.

Coalescing.  Hits and ``last_used`` are buffered in memory and written in one
transaction when a threshold or interval passes (checked on each call), at
any other write (piggybacked), at ``close()``, and at interpreter exit.  So a
get costs no write.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import json
import math
import os
import random
import re
import sqlite3
import threading
import time
import urllib.parse
import warnings
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import filelock

from . import _codec, _schema
from ._entry import ENTRY_COLUMNS, BadRow, Entry, GcResult, VerifyResult, validate_meta
from ._errors import (
    DAMAGE_CODES,
    StoreCorruptError,
    StoreCorruptionWarning,
    StoreError,
    StoreLockedError,
    StorePermissionError,
    StoreReadOnlyError,
    StoreVersionError,
    is_busy,
    sqlite_code,
    translate,
)
from ._policy import POLICIES, cost_log, get_policy
from ._sidefiles import SideFiles, SizeMismatch

__all__ = ["DB_NAME", "INLINE_THRESHOLD", "Store"]

DB_NAME = "store.db"
LOCK_NAME = "store.lock"
VALUES_DIR = "values"
INLINE_THRESHOLD = 256 * 1024
#: Default bound on one value, raw or stored: what a row may claim before it is
#: refused unread (so a crafted row cannot make a get allocate more).
MAX_VALUE_SIZE = 4 * 2**30
KEEP_DAMAGED = 2  # damaged databases kept aside for inspection
GC_CACHE_KIB = 65536  # page cache while gc runs
SWEEP_INTERVAL = 86400.0  # seconds between orphan sweeps done at open (gc always sweeps)
MAX_KEY_SET_LEN = 4096  # keys kept per key set
MAX_KEY_SETS = 1024  # key sets kept per store

_COLS = ", ".join(ENTRY_COLUMNS)
_E_COLS = ", ".join(f"e.{c}" for c in ENTRY_COLUMNS)
_ORDERABLE = frozenset(ENTRY_COLUMNS) - {"extra"}
_FILTERABLE = ("backend", "device_kind", "jax_version", "jaxlib_version", "function_name")
_BUILTIN_COUNTERS = ("hits", "misses", "puts", "evictions", "corrupt")

# Connections inherited over fork: never used or closed (closing one in the
# child could checkpoint or unlink the parent's WAL), only kept alive.
_ABANDONED: list[sqlite3.Connection] = []
_LIVE: weakref.WeakSet[Store] = weakref.WeakSet()


class Store:
    """A persistent, multi-process key -> bytes store with metadata, in one directory.

    Args:
        directory: created if missing.  Holds ``store.db`` (+ ``-wal``/``-shm``),
            ``store.lock`` and ``values/`` (side files).
        max_bytes: bound on the sum of stored (compressed) value sizes; puts evict
            by ``policy`` to stay within it.  ``None`` = unbounded (gc can still trim).
        level: zstd level (1-22; negative = faster levels).
        busy_timeout: seconds a call may wait for another process's write lock
            before raising StoreLockedError.  ``0`` = try once.
        policy: eviction order, one of ``"cost"`` (default), ``"lru"``, ``"fifo"``;
            see :mod:`store._policy`.
        inline_threshold: values whose stored size is at least this many bytes go to
            side files.
        flush_interval: seconds between flushes of coalesced hit/counter updates.
        flush_threshold: pending updates that force a flush.
        orphan_grace: seconds an unreferenced side file must age before gc deletes it
            (protects a writer that has written its file but not yet committed; keep
            well above ``busy_timeout``).
        fsync: fsync side files before committing their rows.  Turning it off is only
            safe against process crashes, not power loss.
        read_only: ``None`` (default): open for writing, and fall back to reading only
            when the directory or database cannot be written (a read-only mount, a
            full disk); ``True``: never write.  Read-only, every write raises
            StoreReadOnlyError and hits are not counted; see :attr:`read_only`.
        repair: move a damaged database aside (``store.db.damaged-*``, kept for
            inspection) and start an empty one, with one StoreCorruptionWarning,
            instead of raising StoreCorruptError.  A database of a newer schema is
            never touched.
        max_value_size: no value larger than this (raw or stored) is read; a row
            claiming more is treated as corrupt.  Bounds the memory one get can take
            whatever the rows say.
        report: ``report(message, category, cause)`` is told of damage found and of
            lost work (default: a warning, once per category and cause).

    Use as a context manager or call :meth:`close`.  Safe to share between threads;
    each thread and each forked process gets its own SQLite connection.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        max_bytes: int | None = None,
        level: int = 3,
        busy_timeout: float = 30.0,
        policy: str = "cost",
        inline_threshold: int = INLINE_THRESHOLD,
        flush_interval: float = 5.0,
        flush_threshold: int = 1000,
        orphan_grace: float = 900.0,
        fsync: bool = True,
        read_only: bool | None = None,
        repair: bool = True,
        max_value_size: int = MAX_VALUE_SIZE,
        report: Callable[[str, type[Warning], str], None] | None = None,
    ) -> None:
        if max_bytes is not None and (not isinstance(max_bytes, int) or max_bytes < 0):
            raise ValueError(f"max_bytes must be None or an int >= 0, got {max_bytes!r}")
        if not isinstance(level, int) or not -7 <= level <= 22:
            raise ValueError(f"level must be an int in [-7, 22], got {level!r}")
        if busy_timeout < 0:
            raise ValueError(f"busy_timeout must be >= 0, got {busy_timeout!r}")
        if inline_threshold < 0:
            raise ValueError(f"inline_threshold must be >= 0, got {inline_threshold!r}")
        if not isinstance(max_value_size, int) or max_value_size < 1:
            raise ValueError(f"max_value_size must be an int >= 1, got {max_value_size!r}")
        self.directory = Path(directory)
        self.max_bytes = max_bytes
        self.level = level
        self.busy_timeout = float(busy_timeout)
        self.policy = get_policy(policy)
        self.inline_threshold = inline_threshold
        self.flush_interval = float(flush_interval)
        self.flush_threshold = int(flush_threshold)
        self.orphan_grace = float(orphan_grace)
        self.max_value_size = max_value_size
        self.repair = repair
        # How damage and lost work are reported: a warning by default; an embedding
        # application (pcache) passes its own, e.g. to log instead of warn.
        self._report_to = report or self._warn_once
        self._reported: set[tuple[str, str]] = set()
        self._db_path = self.directory / DB_NAME
        self._files = SideFiles(self.directory / VALUES_DIR, fsync=fsync)
        self._flock = filelock.FileLock(str(self.directory / LOCK_NAME))
        self._closed = False
        #: True when this store only reads (asked for, or fallen back to); then
        #: :attr:`read_only_reason` says why.
        self.read_only = bool(read_only)
        self.read_only_reason = "opened read-only" if read_only else ""
        self._immutable = False  # read-only and SQLite could not share the WAL index
        self._generation = 0  # bumped when a damaged database is replaced
        self._quarantining = False
        self._reset_process_state()
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise translate(exc, f"creating store directory {self.directory}") from exc
        if read_only is None and not self._writable():
            self._go_read_only("the directory or database is not writable")
        try:
            self._open_schema()
        except (StoreVersionError, StoreCorruptError, StoreLockedError):
            raise
        except StoreError as exc:
            # Permission, a full disk (SQLite cannot size its WAL index: "disk I/O
            # error"), a read-only mount: what cannot be written may still be read.
            if read_only is not None or self.read_only:
                raise
            self._go_read_only(f"opening it for writing failed ({exc})")
            self._open_schema()
        _LIVE.add(self)

    # ------------------------------------------------------------------ plumbing

    def _writable(self) -> bool:
        if not os.access(self.directory, os.W_OK):
            return False
        return not self._db_path.exists() or os.access(self._db_path, os.W_OK)

    def _go_read_only(self, why: str) -> None:
        self._drop_connections()
        self.read_only = True
        self.read_only_reason = why
        with self._pending_lock:
            self._pending_hits, self._pending_counters, self._pending_n = {}, {}, 0

    def _drop_connections(self) -> None:
        """Forget every connection (they may be in use on other threads: they are
        closed at close(), never here)."""
        with self._cons_lock:
            self._stale.extend(self._cons)
            self._cons, self._owners = [], []
        self._generation += 1

    def _reset_process_state(self) -> None:
        self._pid = os.getpid()
        self._local = threading.local()
        self._stale: list[sqlite3.Connection] = []
        self._cons: list[sqlite3.Connection] = []
        self._owners: list[tuple[threading.Thread, sqlite3.Connection]] = []
        self._cons_lock = threading.Lock()
        self._pending_lock = threading.Lock()
        self._pending_hits: dict[str, list[float]] = {}  # key -> [hits, last_used]
        self._pending_counters: dict[str, float] = {}
        self._pending_n = 0
        self._last_flush = time.monotonic()

    def _check_pid(self) -> None:
        if os.getpid() != self._pid:
            # Forked: the parent's connections and pending updates are the parent's.
            _ABANDONED.extend(self._cons + self._stale)
            self._reset_process_state()

    def _con(self) -> sqlite3.Connection:
        if self._closed:
            raise StoreError(f"store {self.directory} is closed")
        self._check_pid()
        con = getattr(self._local, "con", None)
        if con is not None and self._local.generation != self._generation:
            con = None  # the database was replaced, or this store went read-only
        if con is None:
            try:
                con = self._connect()
            except sqlite3.Error as exc:
                raise translate(exc, f"opening {self._db_path}") from exc
            self._local.con = con
            self._local.generation = self._generation
            self._local.identity = _identity(self._db_path)
            with self._cons_lock:
                self._cons.append(con)
                self._owners.append((threading.current_thread(), con))
                dead = [(t, c) for t, c in self._owners if not t.is_alive()]
                for t, c in dead:  # threads that ended without release_connection()
                    self._owners.remove((t, c))
                    self._cons.remove(c)
            for _, c in dead:
                with contextlib.suppress(sqlite3.Error):
                    c.close()
        return con

    def _connect(self) -> sqlite3.Connection:
        # A per-statement slice; the real deadline is our retry loop.
        kw = dict(
            timeout=min(self.busy_timeout, 0.25), isolation_level=None, check_same_thread=False
        )
        if not self.read_only:
            con = sqlite3.connect(self._db_path, **kw)
            try:
                con.execute("PRAGMA synchronous = NORMAL")
                # After a big transaction, shrink the WAL back instead of keeping its peak size.
                con.execute(f"PRAGMA journal_size_limit = {64 * 2**20}")
            except sqlite3.Error:
                con.close()
                raise
            return con
        uri = "file:" + urllib.parse.quote(str(self._db_path)) + "?mode=ro"
        if self._immutable:
            # SQLite reads a WAL database read-only only if it can open or create its
            # -shm index; where it cannot (a read-only mount after a clean close, a
            # full disk) it can still read the database file as it is. Should someone
            # write it meanwhile, what we read may be torn: every value is still
            # checked against its checksum (and by pcache against its HMAC).
            uri += "&immutable=1"
        return sqlite3.connect(uri, uri=True, **kw)

    def release_connection(self) -> None:
        """Close the calling thread's connection, if it has one.

        For short-lived helper threads: a connection otherwise lives (with its file
        descriptors) until :meth:`close`, and every new thread opens its own.
        """
        if self._closed or os.getpid() != self._pid:
            return
        con = getattr(self._local, "con", None)
        if con is None:
            return
        self._local.con = None
        with self._cons_lock:
            if con in self._cons:
                self._cons.remove(con)
            self._owners = [(t, c) for t, c in self._owners if c is not con]
        try:
            con.close()
        except sqlite3.Error:
            pass

    def _retry(self, what: str, attempt: Callable[[], Any], timeout: float | None) -> Any:
        deadline = time.monotonic() + (self.busy_timeout if timeout is None else timeout)
        delay = 0.001
        replaced = False
        while True:
            try:
                return attempt()
            except StoreCorruptError as exc:  # raised opening a connection
                if not replaced and _is_damage(exc.__cause__) and self._damaged():
                    self._quarantine(f"{what}: {exc.__cause__}")
                    replaced = True
                    continue
                raise
            except sqlite3.Error as exc:
                if not replaced and _is_damage(exc) and self._damaged():
                    # Moved aside and replaced by an empty database: once more on that.
                    self._quarantine(f"{what}: {exc}")
                    replaced = True
                    continue
                if is_busy(exc) and time.monotonic() < deadline:
                    time.sleep(
                        max(0.0, min(delay * (0.5 + random.random()), deadline - time.monotonic()))
                    )
                    delay = min(delay * 2, 0.05)
                    continue
                if is_busy(exc):
                    raise StoreLockedError(
                        f"{what}: {self._db_path} stayed locked beyond "
                        f"{self.busy_timeout if timeout is None else timeout:.3g}s ({exc})"
                    ) from exc
                raise translate(exc, what) from exc
            except OSError as exc:
                raise translate(exc, what) from exc

    def _read(self, what: str, fn: Callable[[sqlite3.Connection], Any]) -> Any:
        return self._retry(what, lambda: fn(self._con()), None)

    def _write(
        self,
        what: str,
        fn: Callable[[sqlite3.Connection], Any],
        *,
        timeout: float | None = None,
        flush: bool = True,
    ) -> Any:
        """Run ``fn(con)`` in ``BEGIN IMMEDIATE`` ... ``COMMIT``, retried while busy.

        ``fn`` may run several times (each failed attempt is rolled back).  Pending
        coalesced updates are applied in the same transaction when ``flush``.
        """
        if self.read_only:
            raise StoreReadOnlyError(
                errno.EROFS, f"{what}: {self.directory} is read-only ({self.read_only_reason})"
            )
        pending = self._take_pending() if flush else None

        def attempt() -> Any:
            con = self._con()
            con.execute("BEGIN IMMEDIATE")
            try:
                if pending:  # first, so eviction in fn sees fresh last_used
                    _apply_pending(con, *pending)
                result = fn(con)
                con.execute("COMMIT")
            except BaseException:
                if con.in_transaction:
                    try:
                        con.execute("ROLLBACK")
                    except sqlite3.Error:  # SQLite already rolled back (e.g. SQLITE_FULL)
                        pass
                raise
            return result

        try:
            return self._retry(what, attempt, timeout)
        except BaseException:
            if pending:
                self._restore_pending(*pending)
            raise

    # ----------------------------------------------------------- schema / open

    def _open_schema(self) -> None:
        if self.read_only:
            self._open_read_only()
            return
        version = self._read("reading schema version", _user_version)
        if version != _schema.SCHEMA_VERSION:
            self._upgrade(version)
        self._maybe_sweep()

    def _open_read_only(self) -> None:
        if not self._db_path.exists():
            raise StorePermissionError(
                errno.EACCES,
                f"{self._db_path} does not exist and {self.directory} cannot be written "
                f"({self.read_only_reason})",
            )
        try:
            version = self._read("reading schema version", _user_version)
        except (StoreCorruptError, StoreVersionError, StoreLockedError):
            raise
        except StoreError:  # no -shm and none can be made (read-only, or a full disk)
            self._immutable = True
            self._drop_connections()
            version = self._read("reading schema version", _user_version)
        if version != _schema.SCHEMA_VERSION:
            raise StoreVersionError(
                f"{self._db_path} has schema version {version} and this pcache reads "
                f"{_schema.SCHEMA_VERSION}; it is read-only here, so it cannot be migrated"
            )

    def _maybe_sweep(self) -> None:
        """Sweep crash leftovers at open if nobody has for SWEEP_INTERVAL (so orphans
        cannot pile up in a store that never sees a gc).  Skipped if a gc runs now."""

        def last(con: sqlite3.Connection) -> float:
            row = con.execute("SELECT value FROM meta WHERE name = 'last_sweep'").fetchone()
            try:
                t = float(row[0]) if row else 0.0
            except (TypeError, ValueError):  # not a time: sweep now (and rewrite it)
                return 0.0
            return t if math.isfinite(t) else 0.0

        if time.time() - self._read("reading last sweep time", last) < SWEEP_INTERVAL:
            return
        try:
            self._flock.acquire(timeout=0)
        except filelock.Timeout:  # a gc (which sweeps) or another opener holds it
            return
        try:
            self._sweep(self.orphan_grace)
        except StoreLockedError:  # busy writers: try again at the next open
            pass
        finally:
            self._flock.release()

    def _upgrade(self, version: int) -> None:
        if version < 0 or (version > _schema.SCHEMA_VERSION and not self._looks_like_a_store()):
            self._quarantine(f"impossible schema version {version}")
            return
        if version > _schema.SCHEMA_VERSION:
            raise StoreVersionError(
                f"{self._db_path} has schema version {version}; this pcache understands "
                f"<= {_schema.SCHEMA_VERSION}. Upgrade pcache or use another directory."
            )
        with self._file_lock("creating/migrating the schema"):
            version = self._read("reading schema version", _user_version)
            if version == _schema.SCHEMA_VERSION:
                return  # another process did it while we waited
            if version == 0:
                try:
                    self._create()
                except _ForeignDatabase as exc:
                    if not self.repair:
                        raise
                    self._quarantine(str(exc), locked=True)
            else:
                self._write(
                    f"migrating schema {version} -> {_schema.SCHEMA_VERSION}",
                    lambda con: _schema.migrate(con, version),
                    flush=False,
                )

    def _create(self) -> None:
        def tables(con: sqlite3.Connection) -> list[str]:
            return [r[0] for r in con.execute("SELECT name FROM sqlite_master")]

        existing = self._read("inspecting database", tables)
        if existing:
            raise _ForeignDatabase(
                f"{self._db_path} is a SQLite database but not a pcache store "
                f"(user_version 0, tables {existing[:5]})"
            )

        def pragmas() -> None:
            con = self._con()
            con.execute("PRAGMA auto_vacuum = INCREMENTAL")  # only effective before tables
            con.execute("PRAGMA journal_mode = WAL")  # persistent in the file

        self._retry("configuring database", pragmas, None)

        def create(con: sqlite3.Connection) -> None:
            _schema.create(con)
            now = repr(time.time())
            con.executemany(
                "INSERT OR REPLACE INTO meta (name, value) VALUES (?, ?)",
                [("created", now), ("last_sweep", now)],
            )

        self._write("creating schema", create, flush=False)

    def _looks_like_a_store(self) -> bool:
        """A newer pcache's database (left alone) rather than damage: it has our tables."""

        def tables(con: sqlite3.Connection) -> set[str]:
            return set(_schema.shape(con))

        return {"table entries", "table meta"} <= self._read("inspecting database", tables)

    def _damaged(self) -> bool:
        """Whether the database itself is damaged (not a transient error): asked once
        SQLite reported corruption, by a check of the whole file."""
        if not self.repair or self.read_only or self._quarantining:
            return False
        try:
            con = sqlite3.connect(self._db_path, timeout=min(self.busy_timeout, 1.0))
            try:
                lines = [r[0] for r in con.execute("PRAGMA quick_check(1)").fetchall()]
            finally:
                con.close()
        except sqlite3.Error as check:
            return _is_damage(check)
        return lines != ["ok"]

    def _quarantine(self, why: str, *, locked: bool = False) -> None:
        """Move the damaged database aside (kept for inspection, the newest few) and
        open an empty one in its place.  Another process may have done it already:
        the file is only moved while it is still the one this store opened."""
        if not self.repair or self.read_only:
            raise StoreCorruptError(f"{self._db_path} is damaged: {why}")
        mine = getattr(self._local, "identity", None)
        self._quarantining = True
        try:
            lock = (
                contextlib.nullcontext()
                if locked
                else self._file_lock("replacing a damaged database")
            )
            with lock:
                current = _identity(self._db_path)
                self._drop_connections()
                if current is not None and (mine is None or current == mine):
                    dest = self._move_aside()
                    self._report(
                        f"pcache store {self.directory}: the database was damaged ({why}); "
                        f"moved it aside to {dest.name} and started an empty store",
                        StoreCorruptionWarning,
                        "database",
                    )
                # else another process replaced it already: use theirs.
                if self._read("reading schema version", _user_version) == 0:
                    self._create()
        finally:
            self._quarantining = False

    def _move_aside(self) -> Path:
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
        dest = self.directory / f"{DB_NAME}.damaged-{stamp}-{os.getpid()}"
        # The WAL and its index first: a new database must never meet the old WAL.
        for suffix in ("-wal", "-shm", "", "-wal", "-shm"):
            with contextlib.suppress(FileNotFoundError):
                os.replace(f"{self._db_path}{suffix}", f"{dest}{suffix}")
        old = sorted(self.directory.glob(f"{DB_NAME}.damaged-*[0-9]"), key=os.path.getmtime)
        for path in old[:-KEEP_DAMAGED]:
            for suffix in ("", "-wal", "-shm"):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(f"{path}{suffix}")
        return dest

    def _report(self, message: str, category: type[Warning], cause: str) -> None:
        self._report_to(message, category, cause)

    def _warn_once(self, message: str, category: type[Warning], cause: str) -> None:
        if (category.__name__, cause) in self._reported:
            return
        self._reported.add((category.__name__, cause))
        warnings.warn(message + " (further ones are not reported)", category, stacklevel=5)

    def _file_lock(self, what: str) -> filelock.BaseFileLock:
        try:
            self._flock.acquire(timeout=self.busy_timeout)
        except filelock.Timeout as exc:
            raise StoreLockedError(
                f"{what}: {self._flock.lock_file} held by another process beyond "
                f"{self.busy_timeout:.3g}s"
            ) from exc
        except OSError as exc:
            raise translate(exc, f"{what}: locking {self._flock.lock_file}") from exc
        # acquire() above counted once; the context manager releases once.
        return _Release(self._flock)

    # -------------------------------------------------------- coalesced updates

    def _note_hit(self, key: str) -> None:
        self._check_pid()
        if self.read_only:
            return
        now = time.time()
        with self._pending_lock:
            h = self._pending_hits.get(key)
            if h is None:
                self._pending_hits[key] = [1, now]
            else:
                h[0] += 1
                h[1] = now
            self._pending_counters["hits"] = self._pending_counters.get("hits", 0) + 1
            self._pending_n += 1

    def _note_counters(self, counters: Mapping[str, float]) -> None:
        self._check_pid()
        if self.read_only:
            return
        with self._pending_lock:
            for name, value in counters.items():
                self._pending_counters[name] = self._pending_counters.get(name, 0) + value
            self._pending_n += 1

    def _take_pending(self) -> tuple[dict, dict] | None:
        with self._pending_lock:
            if not self._pending_n:
                return None
            hits, counters = self._pending_hits, self._pending_counters
            self._pending_hits, self._pending_counters, self._pending_n = {}, {}, 0
            self._last_flush = time.monotonic()
        return hits, counters

    def _restore_pending(self, hits: dict, counters: dict) -> None:
        with self._pending_lock:
            for key, (n, t) in hits.items():
                h = self._pending_hits.setdefault(key, [0, t])
                h[0] += n
                h[1] = max(h[1], t)
            for name, v in counters.items():
                self._pending_counters[name] = self._pending_counters.get(name, 0) + v
            self._pending_n += max(1, len(hits))

    def _maybe_flush(self) -> None:
        if self._pending_n >= self.flush_threshold or (
            self._pending_n and time.monotonic() - self._last_flush >= self.flush_interval
        ):
            try:
                # Opportunistic: if another process holds the lock, keep the updates
                # buffered and try again later instead of stalling a get.
                self._write("flushing hit counts", lambda con: None, timeout=0.05)
            except StoreLockedError:
                pass

    def flush(self) -> None:
        """Write buffered hits, ``last_used`` times and counters now."""
        if self._pending_n:
            self._write("flushing hit counts", lambda con: None)

    # ------------------------------------------------------------------ values

    def put(self, key: str, value: bytes, *, meta: Mapping[str, Any] | None = None) -> None:
        """Store ``value`` under ``key``, replacing any previous value.

        ``meta`` keys: backend, device_kind, jax_version, jaxlib_version,
        function_name (str), compile_seconds (float >= 0), extra (JSON-able dict);
        others raise ValueError.  Evicts by policy afterwards if over ``max_bytes``.
        Raises StoreFullError, StorePermissionError, StoreLockedError.
        """
        _check_key(key)
        if not isinstance(value, (bytes, bytearray, memoryview)):
            raise TypeError(f"value must be bytes-like, got {type(value).__name__}")
        raw = bytes(value)
        m = validate_meta(meta)
        if len(raw) > self.max_value_size:
            raise ValueError(
                f"value of {len(raw)} bytes exceeds max_value_size={self.max_value_size}"
            )
        if self.read_only:
            self._write(f"put {key!r}", lambda con: None)  # raises StoreReadOnlyError
        stored, codec = _codec.encode(raw, self.level)
        digest = _codec.checksum(raw)
        file = None
        if len(stored) >= self.inline_threshold:
            try:
                file = self._files.write(stored)
            except OSError as exc:
                raise translate(exc, f"writing side file for {key!r}") from exc
        now = time.time()
        row = (
            key,
            m["backend"],
            m["device_kind"],
            m["jax_version"],
            m["jaxlib_version"],
            m["function_name"],
            len(raw),
            len(stored),
            m["compile_seconds"],
            now,
            now,
            0,
            codec,
            digest,
            m["extra"],
            file,
            cost_log(m["compile_seconds"], len(stored)),
        )
        unlink: list[str] = []

        def txn(con: sqlite3.Connection) -> None:
            unlink.clear()
            old = con.execute("SELECT id, file FROM entries WHERE key = ?", (key,)).fetchone()
            if old is not None:
                con.execute("DELETE FROM entries WHERE id = ?", (old[0],))
                if old[1]:
                    unlink.append(old[1])
            cur = con.execute(
                f"INSERT INTO entries ({_COLS}, file, cost_log) VALUES ({', '.join('?' * 17)})",
                row,
            )
            if file is None:
                con.execute("INSERT INTO blobs (id, data) VALUES (?, ?)", (cur.lastrowid, stored))
            evicted = 0
            if self.max_bytes is not None:
                victims = self._victims(con, self.max_bytes)
                evicted = len(victims)
                unlink.extend(self._delete_rows(con, victims))
            _add_counters(con, {"puts": 1, "evictions": evicted} if evicted else {"puts": 1})

        try:
            self._write(f"put {key!r}", txn)
        except BaseException:
            if file is not None:
                self._files.unlink(file)
            raise
        for name in unlink:
            self._unlink_file(name)

    def get(self, key: str) -> bytes | None:
        """The value stored under ``key``, or None.

        The value's checksum is verified; on mismatch the entry is removed, a
        StoreCorruptionWarning is issued, and None is returned.
        """
        got = self._get(key, with_entry=False)
        return None if got is None else got[0]

    def get_entry(
        self,
        key: str,
        *,
        touch: bool = True,
        verify: bool = True,
        admit: Callable[[Entry], None] | None = None,
    ) -> tuple[bytes, Entry] | None:
        """``(value, entry)`` for ``key``, or None; checked like :meth:`get`.

        ``touch=False`` reads without counting a hit or a miss and without renewing
        ``last_used`` (a speculative read: call :meth:`touch` if the value gets used).
        ``verify=False`` skips the checksum of the value (sizes and decoding are still
        checked): for callers that authenticate the bytes themselves, e.g. with an
        HMAC, and would otherwise hash every byte twice. They can tell corruption
        from forgery afterwards with :func:`checksum_matches`.
        ``admit(entry)`` is called with the (validated) metadata before any value
        byte is read or inflated; whatever it raises propagates.
        """
        return self._get(key, with_entry=True, touch=touch, verify=verify, admit=admit)

    def touch(self, key: str) -> None:
        """Count a hit on ``key`` and renew its ``last_used`` (coalesced, like a get)."""
        _check_key(key)
        self._note_hit(key)
        self._maybe_flush()

    _GET = (
        f"SELECT e.id, e.file, length(b.data), {_E_COLS} "
        "FROM entries e LEFT JOIN blobs b ON b.id = e.id WHERE e.key = ?"
    )

    def _get(
        self,
        key: str,
        *,
        with_entry: bool,
        touch: bool = True,
        verify: bool = True,
        admit: Callable[[Entry], None] | None = None,
    ) -> tuple[bytes, Entry | None] | None:
        _check_key(key)
        for _ in range(3):  # retried only when a concurrent overwrite moved the value
            row = self._read(f"get {key!r}", lambda con: con.execute(self._GET, (key,)).fetchone())
            if row is None:
                self._miss(touch)
                return None
            rowid, file, blob_len = row[:3]
            entry, problem = self._parse(row[3:], file)
            if problem is None and admit is not None:
                admit(entry)
            data = None
            if problem is None:
                data, problem = self._read_value(rowid, file, blob_len, entry)
                if data is None and problem is None:
                    continue  # overwritten or deleted meanwhile: look again
            if problem is None:
                problem = _check_value(
                    data, entry.codec, entry.raw_size, entry.stored_size,
                    entry.checksum if verify else None,
                )  # fmt: skip
            if isinstance(problem, str):
                self._corrupt(key, rowid, file, problem, entry)
                self._miss(touch)
                return None
            if touch:
                self._note_hit(key)
                self._maybe_flush()
            return problem, (entry if with_entry else None)
        self._miss(touch)
        return None

    def _parse(self, row: tuple, file: object) -> tuple[Entry | None, str | None]:
        """A row's Entry, or what is wrong with it: wrong types, a value bigger than
        ``max_value_size``, a side-file name that is not one of ours."""
        try:
            entry = Entry.from_row(row)
        except BadRow as exc:
            return None, f"bad metadata: {exc}"
        if max(entry.raw_size, entry.stored_size) > self.max_value_size:
            return None, (
                f"claims {max(entry.raw_size, entry.stored_size)} bytes, over "
                f"max_value_size={self.max_value_size}"
            )
        if file is not None and not (isinstance(file, str) and SideFiles.valid_name(file)):
            return None, f"bad side-file name {file!r}"
        return entry, None

    def _read_value(
        self, rowid: int, file: str | None, blob_len: int | None, entry: Entry
    ) -> tuple[bytes | None, str | None]:
        """The stored bytes of a row, read only if their size is the recorded one:
        ``(data, None)``, ``(None, problem)``, or ``(None, None)`` when the row
        changed under us."""
        if file is not None:
            try:
                return self._files.read(file, entry.stored_size), None
            except FileNotFoundError:
                if self._row_unchanged(rowid, entry):
                    return None, "its side file is missing"
                return None, None
            except SizeMismatch as exc:
                return None, str(exc)
            except OSError as exc:
                raise translate(exc, f"reading side file of {entry.key!r}") from exc
        if blob_len is None:
            if self._row_unchanged(rowid, entry):
                return None, "its inline value is missing"
            return None, None
        if blob_len != entry.stored_size:
            return None, f"inline value of {blob_len} bytes, recorded {entry.stored_size}"
        row = self._read(
            "reading value",
            lambda con: con.execute(
                "SELECT b.data FROM blobs b JOIN entries e ON e.id = b.id WHERE b.id = ? AND "
                + self._SAME_ROW,
                (rowid, *self._row_identity(entry)),
            ).fetchone(),
        )
        return (None, None) if row is None else (row[0], None)

    def _miss(self, touch: bool = True) -> None:
        if touch:
            self._note_counters({"misses": 1})
            self._maybe_flush()

    # The row a reader read, and not another that took its rowid since: SQLite gives
    # a new row the highest rowid + 1, so a put that replaces the newest entry reuses
    # its id. Key, creation time and checksum tell them apart.
    _SAME_ROW = "e.key = ? AND e.created = ? AND e.checksum = ?"

    @staticmethod
    def _row_identity(entry: Entry) -> tuple:
        return (entry.key, entry.created, entry.checksum)

    def _row_unchanged(self, rowid: int, entry: Entry) -> bool:
        return (
            self._read(
                "checking entry",
                lambda con: con.execute(
                    "SELECT 1 FROM entries e WHERE e.id = ? AND " + self._SAME_ROW,
                    (rowid, *self._row_identity(entry)),
                ).fetchone(),
            )
            is not None
        )

    def _corrupt(
        self, key: str, rowid: int, file: str | None, problem: str, entry: Entry | None = None
    ) -> None:
        self._report(
            f"pcache store {self.directory}: entry {key!r} is corrupt ({problem}); "
            + ("left in place (read-only)" if self.read_only else "removed"),
            StoreCorruptionWarning,
            _cause(problem),
        )
        if self.read_only:
            return
        stored_file = file  # as the row has it, to match the row by
        if not (isinstance(file, str) and SideFiles.valid_name(file)):
            file = None  # never unlinked: not a name of ours

        deleted: list[int] = []

        def txn(con: sqlite3.Connection) -> None:
            # Only the row we read: a concurrent put may have replaced it already, and
            # its row may have the same id (see _SAME_ROW). Side-file names are unique.
            sql, args = "DELETE FROM entries AS e WHERE e.id = ? AND e.key = ? AND e.file IS ?", [
                rowid, key, stored_file,
            ]  # fmt: skip
            if entry is not None:
                sql += " AND " + self._SAME_ROW
                args += self._row_identity(entry)
            deleted[:] = [con.execute(sql, args).rowcount]
            if deleted[0]:
                _add_counters(con, {"corrupt": 1})

        try:
            self._write(f"removing corrupt entry {key!r}", txn)
        except (StoreLockedError, StoreReadOnlyError):
            return  # still detected (and removed) on the next read
        if file is not None and deleted and deleted[0]:
            self._unlink_file(file)

    def _unlink_file(self, name: str) -> None:
        try:
            self._files.unlink(name)
        except OSError as exc:
            # The row is gone already; the file is now an orphan that gc will sweep.
            self._report(
                f"pcache store: could not remove side file {name}: {exc}", UserWarning, "unlink"
            )

    def delete(self, key: str) -> bool:
        """Remove ``key``; True if it was present."""
        _check_key(key)
        found: list[str | None] = []

        def txn(con: sqlite3.Connection) -> bool:
            found.clear()
            row = con.execute("SELECT id, file FROM entries WHERE key = ?", (key,)).fetchone()
            if row is None:
                return False
            con.execute("DELETE FROM entries WHERE id = ?", (row[0],))
            found.append(row[1])
            return True

        removed = self._write(f"delete {key!r}", txn)
        if found and found[0]:
            self._unlink_file(found[0])
        return removed

    def clear(self) -> int:
        """Remove every entry and key set; return how many entries.  Counters are kept."""
        files: list[str] = []

        def txn(con: sqlite3.Connection) -> int:
            files[:] = [r[0] for r in con.execute("SELECT file FROM entries WHERE file NOT NULL")]
            con.execute("DELETE FROM key_sets")
            return con.execute("DELETE FROM entries").rowcount

        n = self._write("clear", txn)
        for name in files:
            self._unlink_file(name)
        return n

    # ---------------------------------------------------------------- key sets

    def put_key_set(self, name: str, keys: Iterable[str]) -> None:
        """Store the ordered list ``keys`` under ``name`` (replacing it).

        Key sets are hints that the caller keeps (e.g. the keys one program used, in
        order, so its next run can read them ahead).  At most ``MAX_KEY_SET_LEN`` keys
        are kept per set and ``MAX_KEY_SETS`` sets per store (the least recently
        written go first); a key need not name a stored entry.
        """
        _check_key(name)
        keys = list(keys)
        for k in keys:
            _check_key(k)
        text = json.dumps(keys[:MAX_KEY_SET_LEN], separators=(",", ":"))

        def txn(con: sqlite3.Connection) -> None:
            con.execute(
                "INSERT OR REPLACE INTO key_sets (name, keys, updated) VALUES (?, ?, ?)",
                (name, text, time.time()),
            )
            con.execute(
                "DELETE FROM key_sets WHERE name NOT IN "
                "(SELECT name FROM key_sets ORDER BY updated DESC LIMIT ?)",
                (MAX_KEY_SETS,),
            )

        self._write(f"put key set {name!r}", txn)

    def key_set(self, name: str) -> list[str]:
        """The keys stored under ``name`` by :meth:`put_key_set`; ``[]`` if none."""
        _check_key(name)
        row = self._read(
            f"key set {name!r}",
            lambda con: con.execute("SELECT keys FROM key_sets WHERE name = ?", (name,)).fetchone(),
        )
        if row is None:
            return []
        try:
            keys = json.loads(row[0])
        except ValueError:  # a hint: unreadable means empty, never an error
            return []
        if not isinstance(keys, list):
            return []
        return [k for k in keys if isinstance(k, str)]

    def key_sets(self) -> list[tuple[str, int, float]]:
        """``(name, number of keys, updated)`` of every key set, newest first."""
        rows = self._read(
            "listing key sets",
            lambda con: con.execute(
                "SELECT name, keys, updated FROM key_sets ORDER BY updated DESC"
            ).fetchall(),
        )
        return [(name, _json_len(keys), updated) for name, keys, updated in rows]

    # ---------------------------------------------------------------- metadata

    def entry(self, key: str) -> Entry | None:
        """Metadata of ``key`` without reading its value, or None."""
        _check_key(key)
        row = self._read(
            f"entry {key!r}",
            lambda con: con.execute(
                f"SELECT {_COLS} FROM entries WHERE key = ?", (key,)
            ).fetchone(),
        )
        return None if row is None else next(self._valid([row]), None)

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, str):
            return False
        return (
            self._read(
                "contains",
                lambda con: con.execute("SELECT 1 FROM entries WHERE key = ?", (key,)).fetchone(),
            )
            is not None
        )

    def __len__(self) -> int:
        return self._read("len", lambda con: _totals(con)[0])

    def __iter__(self) -> Iterator[Entry]:
        """Same as :meth:`entries` with no arguments (entries in key order)."""
        return self.entries()

    def entries(
        self,
        *,
        order_by: str = "key",
        descending: bool = False,
        limit: int | None = None,
        older_than: float | None = None,
        **equal: str,
    ) -> Iterator[Entry]:
        """Entries' metadata, optionally filtered and sorted.

        Args:
            order_by: an Entry field name (not ``extra``), or ``"eviction"`` for the
                store's eviction order (first = evicted first).
            descending: reverse the order.
            limit: at most this many.
            older_than: only entries unused for at least this many seconds.
            **equal: equality filters on backend, device_kind, jax_version,
                jaxlib_version, function_name.

        The rows are read in one statement up front (a consistent snapshot).
        """
        if order_by == "eviction":
            order = self.policy.order_by
        elif order_by in _ORDERABLE:
            order = order_by
        else:
            raise ValueError(f"order_by must be 'eviction' or one of {sorted(_ORDERABLE)}")
        where, params = [], []
        for name, value in equal.items():
            if name not in _FILTERABLE:
                raise TypeError(f"unknown filter {name!r}; valid: {list(_FILTERABLE)}")
            where.append(f"{name} = ?")
            params.append(value)
        if older_than is not None:
            where.append("last_used <= ?")
            params.append(time.time() - older_than)
        sql = f"SELECT {_COLS} FROM entries"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += f" ORDER BY {order} {'DESC' if descending else 'ASC'}"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        rows = self._read("listing entries", lambda con: con.execute(sql, params).fetchall())
        return self._valid(rows)

    def _valid(self, rows: Iterable[tuple]) -> Iterator[Entry]:
        """Entries of rows (``ENTRY_COLUMNS``), without the ones whose metadata is
        invalid: reported once; a get, gc or ``verify(fix=True)`` removes them."""
        for row in rows:
            try:
                yield Entry.from_row(row)
            except BadRow as exc:
                self._report(
                    f"pcache store {self.directory}: entry {row[0]!r} has bad metadata ({exc}); "
                    "skipped",
                    StoreCorruptionWarning,
                    "bad metadata",
                )

    def bump(self, counters: Mapping[str, int | float]) -> None:
        """Add to persisted named counters (coalesced like hits)."""
        for name, value in counters.items():
            if not isinstance(name, str) or not name:
                raise TypeError(f"counter names must be non-empty str, got {name!r}")
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise TypeError(f"counter {name!r}: value must be int or float, got {value!r}")
        if counters:
            self._note_counters(counters)
            self._maybe_flush()

    def stats(self) -> dict[str, Any]:
        """Sizes and persisted counters, plus this process's not-yet-flushed counts.

        Keys: entries, raw_bytes, stored_bytes, file_bytes, disk_bytes, max_bytes,
        policy, hits, misses, puts, evictions, corrupt, and every bumped counter.
        """

        def read(con: sqlite3.Connection) -> tuple:
            return _totals(con), con.execute("SELECT name, value FROM counters").fetchall()

        (n, raw, stored, file_bytes), counters = self._read("stats", read)
        out: dict[str, Any] = {
            "entries": n,
            "raw_bytes": raw,
            "stored_bytes": stored,
            "file_bytes": file_bytes,
            "disk_bytes": self._db_disk_bytes() + file_bytes,
            "max_bytes": self.max_bytes,
            "policy": self.policy.name,
        }
        sizes = set(out)
        out.update(dict.fromkeys(_BUILTIN_COUNTERS, 0))
        # A counter that is not a finite number (edited, damaged) reads as absent.
        out.update(
            (name, value)
            for name, value in counters
            if isinstance(name, str)
            and name not in sizes
            and isinstance(value, (int, float))
            and not isinstance(value, bool)
            and math.isfinite(value)
        )
        with self._pending_lock:
            for name, v in self._pending_counters.items():
                out[name] = out.get(name, 0) + v
        return out

    def _db_disk_bytes(self) -> int:
        total = 0
        for suffix in ("", "-wal", "-shm"):
            try:
                total += os.stat(f"{self._db_path}{suffix}").st_size
            except FileNotFoundError:
                pass
        return total

    # ------------------------------------------------------------ eviction, gc

    def _victims(
        self, con: sqlite3.Connection, limit: int, skip: Mapping[int, Entry] | None = None
    ) -> list[tuple]:
        """Rows ``(id, stored_size, file, *ENTRY_COLUMNS)`` to remove, in policy order, so
        that the stored bytes left (not counting ``skip``, already going) are <= limit.
        Reads the policy's index from its start; stops as soon as enough is found."""
        total = _totals(con)[2]
        if skip:
            total -= sum(e.stored_size for e in skip.values())
        excess = total - limit
        out: list[tuple] = []
        if excess <= 0:
            return out
        cur = con.execute(
            f"SELECT id, stored_size, file, {_COLS} FROM entries ORDER BY {self.policy.order_by}"
        )
        for row in cur:
            if skip and row[0] in skip:
                continue
            out.append(row)
            excess -= _count(row[1])  # a row with a bad size goes, and frees nothing we know
            if excess <= 0:
                break
        cur.close()
        return out

    @staticmethod
    def _delete_rows(con: sqlite3.Connection, rows: list[tuple]) -> list[str]:
        con.executemany("DELETE FROM entries WHERE id = ?", [(r[0],) for r in rows])
        return [r[2] for r in rows if r[2]]

    def gc(
        self,
        *,
        max_bytes: int | None = None,
        older_than: float | None = None,
        predicate: Callable[[Entry], bool] | None = None,
        dry_run: bool = False,
        progress: Callable[[int, int], None] | None = None,
    ) -> GcResult:
        """Remove entries, evict to a size, sweep orphans, and give disk space back.

        Removes entries unused for ``older_than`` seconds and those for which
        ``predicate(entry)`` is True, then evicts by policy down to ``max_bytes``
        (default: the store's ``max_bytes``).  Always removes corrupt rows (side file
        missing, inline blob missing) and side files no row references that are older
        than ``orphan_grace``.  With ``dry_run`` nothing is changed and ``removed`` lists
        what would go.  ``progress(done, total)`` is called as entries are deleted.
        Runs under the store's file lock (one gc at a time); other processes keep
        reading and writing meanwhile.
        """
        limit = self.max_bytes if max_bytes is None else max_bytes
        con = self._con()
        cache_size = con.execute("PRAGMA cache_size").fetchone()[0]
        # Mass deletes touch many b-tree and freelist pages; with SQLite's default 2 MB
        # page cache, deleting 50,000 of 100,000 entries took 3.2 s, with 64 MB 1.1 s.
        con.execute(f"PRAGMA cache_size = {-GC_CACHE_KIB}")
        try:
            with self._file_lock("gc"):
                return self._gc(limit, older_than, predicate, dry_run, progress)
        finally:
            con.execute(f"PRAGMA cache_size = {cache_size}")

    def _gc(
        self,
        limit: int | None,
        older_than: float | None,
        predicate: Callable[[Entry], bool] | None,
        dry_run: bool,
        progress: Callable[[int, int], None] | None,
    ) -> GcResult:
        before = self._disk_bytes_scan()
        self.flush()
        chosen: dict[int, Entry] = {}
        if older_than is not None or predicate is not None:
            sql = f"SELECT id, {_COLS} FROM entries"
            params: list[Any] = []
            if predicate is None:
                sql += " WHERE last_used <= ?"
                params.append(time.time() - older_than)
            rows = self._read(
                "gc: listing entries", lambda con: con.execute(sql, params).fetchall()
            )
            cutoff = None if older_than is None else time.time() - older_than
            for row in rows:
                e = next(self._valid([row[1:]]), None)
                if e is None:
                    continue  # removed by the sweep below
                if (cutoff is not None and e.last_used <= cutoff) or (
                    predicate is not None and predicate(e)
                ):
                    chosen[row[0]] = e
        if limit is not None:
            victims = self._read(
                "gc: choosing victims", lambda con: self._victims(con, limit, chosen)
            )
            for row in victims:
                e = next(self._valid([row[3:]]), None)
                if e is not None:
                    chosen[row[0]] = e
        ids = list(chosen)
        removed = [chosen[i] for i in ids]
        freed = 0
        corrupt = orphans = 0
        if not dry_run:
            freed = self._delete_ids(ids, progress, counter="evictions")
            if older_than is not None:
                cutoff_sets = time.time() - older_than
                self._write(
                    "gc: removing old key sets",
                    lambda con: con.execute(
                        "DELETE FROM key_sets WHERE updated <= ?", (cutoff_sets,)
                    ),
                )
            corrupt, orphans = self._sweep(self.orphan_grace)
            self._reclaim()
        else:
            freed = sum(e.stored_size for e in removed)
        after = self._disk_bytes_scan()
        return GcResult(
            removed=removed,
            bytes_freed=freed,
            orphans_removed=orphans,
            corrupt_removed=corrupt,
            dry_run=dry_run,
            disk_bytes_before=before,
            disk_bytes_after=after,
        )

    def _delete_ids(
        self,
        ids: list[int],
        progress: Callable[[int, int], None] | None,
        counter: str | None,
        batch: int = 20_000,
    ) -> int:
        """Delete rows by id in batches; return stored bytes freed.

        A batch holds the write lock ~0.3 s on the bench box; batches of 2,000 made
        gc 2x slower (a commit, and often a WAL checkpoint, per batch)."""
        freed = 0
        total = len(ids)
        if progress:
            progress(0, total)
        for i in range(0, total, batch):
            chunk = ids[i : i + batch]
            files: list[str] = []

            def txn(
                con: sqlite3.Connection, chunk: list[int] = chunk, files: list[str] = files
            ) -> int:
                files.clear()
                # A temp table, not "IN (?, ?, ...)": old SQLite builds allow 999 variables.
                con.execute("CREATE TEMP TABLE IF NOT EXISTS doomed (id INTEGER PRIMARY KEY)")
                con.execute("DELETE FROM temp.doomed")
                con.executemany(
                    "INSERT OR IGNORE INTO temp.doomed (id) VALUES (?)", ((i,) for i in chunk)
                )
                rows = con.execute(
                    "SELECT id, stored_size, file FROM entries WHERE id IN (SELECT id FROM temp.doomed)"
                ).fetchall()
                con.execute("DELETE FROM entries WHERE id IN (SELECT id FROM temp.doomed)")
                files.extend(r[2] for r in rows if r[2])
                if counter and rows:
                    _add_counters(con, {counter: len(rows)})
                return sum(_count(r[1]) for r in rows)

            freed += self._write("gc: deleting entries", txn)
            for name in files:
                self._unlink_file(name)
            if progress:
                progress(min(i + batch, total), total)
        return freed

    def _sweep(self, grace: float) -> tuple[int, int]:
        """Remove corrupt rows and orphan side files; return ``(rows, files)`` removed."""
        listing = self._files.listing()  # first: a file committed after this is not judged

        def read(con: sqlite3.Connection) -> tuple[list, list]:
            rows = con.execute(f"SELECT id, file, {_COLS} FROM entries").fetchall()
            no_blob = con.execute(
                "SELECT id FROM entries WHERE file IS NULL AND id NOT IN (SELECT id FROM blobs)"
            ).fetchall()
            return rows, no_blob

        rows, no_blob = self._read("gc: reading entries", read)
        referenced = {r[1] for r in rows if isinstance(r[1], str)}
        bad = [i for (i,) in no_blob]
        for row in rows:
            rowid, name = row[:2]
            if self._parse(row[2:], name)[1] is not None:
                bad.append(rowid)  # bad metadata, too big, or a side-file name not ours
            elif name is not None and name not in listing and not self._files.path(name).exists():
                bad.append(rowid)
        if bad:
            self._delete_ids(bad, None, counter="corrupt")
        self._write(
            "gc: removing stray blobs",
            lambda con: con.execute("DELETE FROM blobs WHERE id NOT IN (SELECT id FROM entries)"),
        )
        now = time.time()
        orphans = 0
        for name, (mtime, _size) in listing.items():
            if name not in referenced and now - mtime >= grace:
                self._unlink_file(name)
                orphans += 1
        self._write(
            "gc: recording sweep time",
            lambda con: con.execute(
                "INSERT OR REPLACE INTO meta (name, value) VALUES ('last_sweep', ?)", (repr(now),)
            ),
        )
        return len(bad), orphans

    def _reclaim(self) -> None:
        """Give freed pages back to the OS and truncate the WAL (best effort)."""

        # sqlite3's execute() steps this pragma once (= one page); executescript() runs
        # it to completion, in its own implicit write transaction.
        self._retry(
            "gc: incremental vacuum",
            lambda: self._con().executescript("PRAGMA incremental_vacuum;"),
            None,
        )
        try:
            self._con().execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        except sqlite3.OperationalError as exc:
            if not is_busy(exc):  # busy = readers active; the WAL shrinks later
                raise translate(exc, "gc: checkpoint") from exc

    def _disk_bytes_scan(self) -> int:
        return self._db_disk_bytes() + sum(s for _, s in self._files.listing().values())

    def verify(
        self,
        *,
        fix: bool = False,
        progress: Callable[[int, int], None] | None = None,
        admit: Callable[[Entry], None] | None = None,
    ) -> VerifyResult:
        """Check SQLite integrity, every entry's metadata and bytes (against its
        checksum), side-file existence, and orphan side files.

        ``admit(entry)`` is asked about each entry before its value is read (as in
        :meth:`get_entry`); what it raises marks the entry bad, with the message as
        the reason.  With ``fix``, bad entries and orphans older than
        ``orphan_grace`` are removed, and a database that fails its integrity check
        even after a reindex is moved aside and replaced by an empty one
        (:attr:`VerifyResult.replaced`).  ``progress(done, total)`` per entry.
        """
        integrity = self._integrity()
        replaced = None
        if integrity and fix and not self.read_only:
            self._retry("verify: reindex", lambda: self._con().execute("REINDEX"), None)
            self._write("verify: restoring the schema", _schema.restore, flush=False)
            integrity = self._integrity()
            if integrity:
                self._quarantine_for_verify("; ".join(integrity[:3]))
                replaced = integrity
        rows = self._read(
            "verify: listing",
            lambda con: con.execute(
                f"SELECT e.id, e.file, length(b.data), {_E_COLS} "
                "FROM entries e LEFT JOIN blobs b ON b.id = e.id ORDER BY e.id"
            ).fetchall(),
        )
        listing = self._files.listing()
        corrupt: list[str] = []
        missing: list[str] = []
        reasons: dict[str, str] = {}
        bad_ids: list[int] = []
        for n, row in enumerate(rows, 1):
            rowid, file, blob_len = row[:3]
            key = row[3] if isinstance(row[3], str) else repr(row[3])
            entry, problem = self._parse(row[3:], file)
            if problem is None and admit is not None:
                try:
                    admit(entry)
                except Exception as exc:
                    problem = str(exc) or type(exc).__name__
            data = None
            if problem is None:
                data, problem = self._read_value(rowid, file, blob_len, entry)
            if problem is None and data is not None:
                checked = _check_value(
                    data, entry.codec, entry.raw_size, entry.stored_size, entry.checksum
                )
                problem = checked if isinstance(checked, str) else None
            if problem is not None:
                (missing if "missing" in problem else corrupt).append(key)
                reasons[key] = problem
                bad_ids.append(rowid)
            if progress:
                progress(n, len(rows))
        referenced = {r[1] for r in rows if isinstance(r[1], str)}
        now = time.time()
        orphans = sorted(
            name
            for name, (mtime, _) in listing.items()
            if name not in referenced and now - mtime >= self.orphan_grace
        )
        # A file committed after our listing of rows is not an orphan.
        if orphans:
            live = self._read(
                "verify: re-reading side files",
                lambda con: {
                    r[0] for r in con.execute("SELECT file FROM entries WHERE file NOT NULL")
                },
            )
            orphans = [o for o in orphans if o not in live]
        fixed = 0
        if fix and not self.read_only:
            if bad_ids:
                self._delete_ids(bad_ids, None, counter="corrupt")
                fixed += len(bad_ids)
            for name in orphans:
                self._unlink_file(name)
                fixed += 1
        return VerifyResult(
            checked=len(rows),
            integrity=replaced or integrity,
            corrupt=corrupt,
            missing=missing,
            orphans=orphans,
            fixed=fixed,
            reasons=reasons,
            replaced=replaced is not None,
        )

    def _integrity(self) -> list[str]:
        """SQLite's integrity check, and what the database lacks of the schema."""
        lines = self._read(
            "verify: integrity_check",
            lambda con: [r[0] for r in con.execute("PRAGMA integrity_check").fetchall()],
        )
        lines = [line for line in lines if line != "ok"]
        return lines + self._read("verify: schema", _schema.shape_problems)

    def _quarantine_for_verify(self, why: str) -> None:
        repair, self.repair = self.repair, True
        try:
            self._quarantine(why)
        finally:
            self.repair = repair

    # ---------------------------------------------------------------- lifetime

    def close(self) -> None:
        """Flush buffered updates and close this process's connections.  Idempotent."""
        if self._closed:
            return
        try:
            self._check_pid()
            if self._pending_n:
                try:
                    self.flush()
                except StoreError as exc:
                    self._report(
                        f"pcache store {self.directory}: lost buffered hit counts at close: {exc}",
                        UserWarning,
                        "close",
                    )
        finally:
            self._closed = True
            _LIVE.discard(self)
            with self._cons_lock:
                cons, self._cons, self._owners = self._cons + self._stale, [], []
                self._stale = []
            for con in cons:
                try:
                    con.close()
                except sqlite3.Error:  # a connection mid-use in another thread
                    pass

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Store({str(self.directory)!r}, max_bytes={self.max_bytes}, policy={self.policy.name!r})"


class _ForeignDatabase(StoreCorruptError):
    """store.db is a SQLite database, but not one a Store wrote."""


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _is_damage(exc: BaseException) -> bool:
    return isinstance(exc, sqlite3.DatabaseError) and sqlite_code(exc) in DAMAGE_CODES


class _Release:
    def __init__(self, lock: filelock.BaseFileLock) -> None:
        self._lock = lock

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        self._lock.release()


def _user_version(con: sqlite3.Connection) -> int:
    return con.execute("PRAGMA user_version").fetchone()[0]


def _json_len(text: str) -> int:
    try:
        value = json.loads(text)
    except ValueError:
        return 0
    return len(value) if isinstance(value, list) else 0


def _cause(problem: str) -> str:
    """A corruption problem without its particulars (sizes, names): one report each."""
    return re.sub(r"\d+|'.*'|\".*\"", "N", problem.split(":")[0])


def _check_key(key: object) -> None:
    if not isinstance(key, str):
        raise TypeError(f"key must be a str, got {type(key).__name__}")


def checksum_matches(raw: bytes, checksum: str) -> bool:
    """True when ``raw`` has the recorded ``checksum`` (an Entry's ``checksum`` field)."""
    return _codec.matches(raw, checksum)


def _check_value(
    data: bytes, codec: str, raw_size: int, stored_size: int, digest: str | None
) -> bytes | str:
    """The decoded value, or a string saying what is wrong with it (``digest`` None:
    the checksum is left to the caller)."""
    if not isinstance(data, bytes):
        return f"value is {type(data).__name__}, not bytes"
    if len(data) != stored_size:
        return f"stored size {len(data)} != recorded {stored_size}"
    try:
        raw = _codec.decode(data, codec, raw_size)
    except _codec.DecodeError as exc:
        return f"cannot decode: {exc}"
    if len(raw) != raw_size:
        return f"size {len(raw)} != recorded {raw_size}"
    if digest is not None and not _codec.matches(raw, digest):
        return "checksum mismatch"
    return raw


def _count(v: object) -> int:
    return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else 0


def _totals(con: sqlite3.Connection) -> tuple[int, int, int, int]:
    """``(entries, raw_bytes, stored_bytes, file_bytes)`` as the triggers keep them, or
    counted afresh if the totals row is missing or holds anything but counts."""
    row = con.execute(
        "SELECT entries, raw_bytes, stored_bytes, file_bytes FROM totals WHERE id = 0"
    ).fetchone()
    if row is not None and all(_count(v) == v for v in row):
        return row
    n, raw, stored, files = con.execute(
        "SELECT count(*), "
        "total(CASE WHEN typeof(raw_size) = 'integer' THEN raw_size END), "
        "total(CASE WHEN typeof(stored_size) = 'integer' THEN stored_size END), "
        "total(CASE WHEN typeof(stored_size) = 'integer' AND file NOT NULL "
        "THEN stored_size END) FROM entries"
    ).fetchone()
    return n, int(raw), int(stored), int(files)


def _add_counters(con: sqlite3.Connection, counters: Mapping[str, float]) -> None:
    con.executemany(
        "INSERT INTO counters (name, value) VALUES (?, ?) "
        "ON CONFLICT (name) DO UPDATE SET value = value + excluded.value",
        [(k, v) for k, v in counters.items() if v],
    )


def _apply_pending(con: sqlite3.Connection, hits: dict, counters: dict) -> None:
    con.executemany(
        "UPDATE entries SET hits = hits + ?, last_used = max(last_used, ?) WHERE key = ?",
        [(int(n), t, key) for key, (n, t) in hits.items()],
    )
    _add_counters(con, counters)


@atexit.register
def _flush_all_at_exit() -> None:
    for store in list(_LIVE):
        try:
            if not store._closed and store._pid == os.getpid() and store._pending_n:
                store.flush()
        except StoreError:  # locked/full at exit: the counts are best effort
            pass


def policies() -> dict[str, str]:
    """Eviction policy names and what they evict first."""
    return {name: p.doc for name, p in POLICIES.items()}
