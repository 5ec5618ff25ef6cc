"""Connections, retry and transactions: how every part of the store talks to SQLite.

One connection per thread (thread-local) and per process: a
connection is reopened when ``os.getpid()`` changes, and connections
inherited over fork are abandoned, never closed or used.  Writes run in
``BEGIN IMMEDIATE`` and are retried with backoff until a deadline
(``busy_timeout``), then raise StoreLockedError.  sqlite3's ``timeout=``
alone is not trusted because (a) SQLite returns SQLITE_BUSY without calling
the busy handler in several cases (WAL recovery, BUSY_SNAPSHOT, a read
transaction that must upgrade, "schema is locked"), and (b) the handler's
timeout applies per statement, so an operation of several statements could
wait several times ``timeout``.  Our loop gives one deadline per operation.
The file lock ``store.lock`` serializes only what SQLite cannot
(schema creation and migration, gc).  Damage SQLite reports is handed to
``on_damage`` (the store's repair), and the operation runs once more on what it
left in place.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import os
import random
import sqlite3
import threading
import time
import urllib.parse
import weakref
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import filelock

from ._errors import (
    DAMAGE_CODES,
    StoreCorruptError,
    StoreError,
    StoreLockedError,
    StoreReadOnlyError,
    is_busy,
    sqlite_code,
    translate,
)
from ._pending import Pending, apply_pending

__all__ = ["LIVE", "Database", "identity", "is_damage", "user_version"]

# Connections inherited over fork: never used or closed (closing one in the
# child could checkpoint or unlink the parent's WAL), only kept alive.
_ABANDONED: list[sqlite3.Connection] = []
# Open stores' databases, whose buffered updates are flushed at interpreter exit.
LIVE: weakref.WeakSet[Database] = weakref.WeakSet()


class Database:
    """The SQLite file of one store, as this process and its threads reach it.

    ``on_damage(what, exc)`` is asked when SQLite reports damage: it returns True
    when it replaced the database (the operation is then tried once more).
    """

    def __init__(
        self,
        path: Path,
        lock_path: Path,
        *,
        busy_timeout: float,
        flush_threshold: int,
        flush_interval: float,
        read_only: bool,
    ) -> None:
        self.path = path
        self.busy_timeout = busy_timeout
        self.flush_threshold = flush_threshold
        self.flush_interval = flush_interval
        self.flock = filelock.FileLock(str(lock_path))
        self.closed = False
        self.read_only = read_only
        self.read_only_reason = "opened read-only" if read_only else ""
        self.immutable = False  # read-only and SQLite could not share the WAL index
        self.generation = 0  # bumped when a damaged database is replaced
        self.on_damage: Callable[[str, BaseException], bool] = lambda what, exc: False
        self.reset_process_state()

    # ------------------------------------------------------------ connections

    def reset_process_state(self) -> None:
        self.pid = os.getpid()
        self.local = threading.local()
        self.stale: list[sqlite3.Connection] = []
        self.cons: list[sqlite3.Connection] = []
        self.owners: list[tuple[threading.Thread, sqlite3.Connection]] = []
        self.cons_lock = threading.Lock()
        self.pending = Pending(threshold=self.flush_threshold, interval=self.flush_interval)

    def check_pid(self) -> None:
        if os.getpid() != self.pid:
            # Forked: the parent's connections and pending updates are the parent's.
            _ABANDONED.extend(self.cons + self.stale)
            self.reset_process_state()

    def go_read_only(self, why: str) -> None:
        self.drop_connections()
        self.read_only = True
        self.read_only_reason = why
        self.pending.drop()

    def drop_connections(self) -> None:
        """Forget every connection (they may be in use on other threads: they are
        closed at close(), never here)."""
        with self.cons_lock:
            self.stale.extend(self.cons)
            self.cons, self.owners = [], []
        self.generation += 1

    def identity(self) -> tuple[int, int] | None:
        """The file this thread's connection opened (device, inode), if it has one."""
        return getattr(self.local, "identity", None)

    def con(self) -> sqlite3.Connection:
        if self.closed:
            raise StoreError(f"store {self.path.parent} is closed")
        self.check_pid()
        con = getattr(self.local, "con", None)
        if con is not None and self.local.generation != self.generation:
            con = None  # the database was replaced, or this store went read-only
        if con is None:
            try:
                con = self._connect()
            except sqlite3.Error as exc:
                raise translate(exc, f"opening {self.path}") from exc
            self.local.con = con
            self.local.generation = self.generation
            self.local.identity = identity(self.path)
            self._adopt(con)
        return con

    def _adopt(self, con: sqlite3.Connection) -> None:
        with self.cons_lock:
            self.cons.append(con)
            self.owners.append((threading.current_thread(), con))
            dead = [(t, c) for t, c in self.owners if not t.is_alive()]
            for t, c in dead:  # threads that ended without release_connection()
                self.owners.remove((t, c))
                self.cons.remove(c)
        for _, c in dead:
            with contextlib.suppress(sqlite3.Error):
                c.close()

    def _connect(self) -> sqlite3.Connection:
        # A per-statement slice; the real deadline is our retry loop.
        kw = dict(
            timeout=min(self.busy_timeout, 0.25), isolation_level=None, check_same_thread=False
        )
        if not self.read_only:
            con = sqlite3.connect(self.path, **kw)
            try:
                con.execute("PRAGMA synchronous = NORMAL")
                # After a big transaction, shrink the WAL back instead of keeping its peak size.
                con.execute(f"PRAGMA journal_size_limit = {64 * 2**20}")
            except sqlite3.Error:
                con.close()
                raise
            return con
        uri = "file:" + urllib.parse.quote(str(self.path)) + "?mode=ro"
        if self.immutable:
            # SQLite reads a WAL database read-only only if it can open or create its
            # -shm index; where it cannot (a read-only mount after a clean close, a
            # full disk) it can still read the database file as it is. Should someone
            # write it meanwhile, what we read may be torn: every value is still
            # checked against its checksum (and by pcache against its HMAC).
            uri += "&immutable=1"
        return sqlite3.connect(uri, uri=True, **kw)

    def release_connection(self) -> None:
        """Close the calling thread's connection, if it has one."""
        if self.closed or os.getpid() != self.pid:
            return
        con = getattr(self.local, "con", None)
        if con is None:
            return
        self.local.con = None
        with self.cons_lock:
            if con in self.cons:
                self.cons.remove(con)
            self.owners = [(t, c) for t, c in self.owners if c is not con]
        try:
            con.close()
        except sqlite3.Error:
            pass

    def close(self) -> None:
        """Close this process's connections (flushing is the store's business)."""
        self.closed = True
        with self.cons_lock:
            cons, self.cons, self.owners = self.cons + self.stale, [], []
            self.stale = []
        for con in cons:
            try:
                con.close()
            except sqlite3.Error:  # a connection mid-use in another thread
                pass

    # ------------------------------------------------------- retry, transactions

    def retry(self, what: str, attempt: Callable[[], Any], timeout: float | None = None) -> Any:
        wait = self.busy_timeout if timeout is None else timeout
        deadline = time.monotonic() + wait
        delay = 0.001
        replaced = False
        while True:
            try:
                return attempt()
            except StoreCorruptError as exc:  # raised opening a connection
                if not replaced and is_damage(exc.__cause__):
                    replaced = self.on_damage(f"{what}: {exc.__cause__}", exc.__cause__)
                    if replaced:
                        continue
                raise
            except sqlite3.Error as exc:
                if not replaced and is_damage(exc):
                    # Moved aside and replaced by an empty database: once more on that.
                    replaced = self.on_damage(f"{what}: {exc}", exc)
                    if replaced:
                        continue
                if is_busy(exc) and time.monotonic() < deadline:
                    time.sleep(
                        max(0.0, min(delay * (0.5 + random.random()), deadline - time.monotonic()))
                    )
                    delay = min(delay * 2, 0.05)
                    continue
                if is_busy(exc):
                    raise StoreLockedError(
                        f"{what}: {self.path} stayed locked beyond {wait:.3g}s ({exc})"
                    ) from exc
                raise translate(exc, what) from exc
            except OSError as exc:
                raise translate(exc, what) from exc

    def read(self, what: str, fn: Callable[[sqlite3.Connection], Any]) -> Any:
        return self.retry(what, lambda: fn(self.con()))

    def refuse_if_read_only(self, what: str) -> None:
        if self.read_only:
            raise StoreReadOnlyError(
                errno.EROFS, f"{what}: {self.path.parent} is read-only ({self.read_only_reason})"
            )

    def write(
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
        self.refuse_if_read_only(what)
        pending = self.pending.take() if flush else None

        def attempt() -> Any:
            con = self.con()
            con.execute("BEGIN IMMEDIATE")
            try:
                if pending:  # first, so eviction in fn sees fresh last_used
                    apply_pending(con, *pending)
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
            return self.retry(what, attempt, timeout)
        except BaseException:
            if pending:
                self.pending.restore(*pending)
            raise

    # ------------------------------------------------------- coalesced updates

    def note_hit(self, key: str) -> None:
        self.check_pid()
        if not self.read_only:
            self.pending.note_hit(key)

    def note_counters(self, counters: Mapping[str, float]) -> None:
        self.check_pid()
        if not self.read_only:
            self.pending.note_counters(counters)

    def maybe_flush(self) -> None:
        if self.pending.due():
            try:
                # Opportunistic: if another process holds the lock, keep the updates
                # buffered and try again later instead of stalling a get.
                self.write("flushing hit counts", lambda con: None, timeout=0.05)
            except StoreLockedError:
                pass

    def flush(self) -> None:
        if self.pending.n:
            self.write("flushing hit counts", lambda con: None)

    def file_lock(self, what: str) -> contextlib.AbstractContextManager[None]:
        """``store.lock``, held until the returned context manager exits."""
        try:
            self.flock.acquire(timeout=self.busy_timeout)
        except filelock.Timeout as exc:
            raise StoreLockedError(
                f"{what}: {self.flock.lock_file} held by another process beyond "
                f"{self.busy_timeout:.3g}s"
            ) from exc
        except OSError as exc:
            raise translate(exc, f"{what}: locking {self.flock.lock_file}") from exc
        # acquire() above counted once; the context manager releases once.
        return _Release(self.flock)

    def disk_bytes(self) -> int:
        """Bytes of the database file, its WAL and its index."""
        total = 0
        for suffix in ("", "-wal", "-shm"):
            try:
                total += os.stat(f"{self.path}{suffix}").st_size
            except FileNotFoundError:
                pass
        return total


class _Release:
    def __init__(self, lock: filelock.BaseFileLock) -> None:
        self._lock = lock

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        self._lock.release()


def identity(path: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def is_damage(exc: BaseException | None) -> bool:
    return isinstance(exc, sqlite3.DatabaseError) and sqlite_code(exc) in DAMAGE_CODES


def user_version(con: sqlite3.Connection) -> int:
    return con.execute("PRAGMA user_version").fetchone()[0]


@atexit.register
def _flush_all_at_exit() -> None:
    for db in list(LIVE):
        try:
            if not db.closed and db.pid == os.getpid() and db.pending.n:
                db.flush()
        except StoreError:  # locked/full at exit: the counts are best effort
            pass
