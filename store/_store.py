"""The Store: the public facade over the store's parts.

    _db        connections (per thread, per process), retry to a deadline, transactions
    _repair    schema creation and upgrade; damaged databases moved aside
    _pending   coalesced hits, last_used times and counters
    _put       put, put_many (all or nothing), delete, clear
    _get       the get path: rows and values checked, corrupt entries removed
    _keysets   ordered key lists kept as hints
    _listing   metadata, listings, sizes and counters
    _evict     eviction order and batch deletes
    _gc        gc and the orphan sweep
    _verify    verify (and its fix)
    _rows      column lists and the checks every part applies to a row

Values are framed by :mod:`store._codec` and kept inline (table ``blobs``) or in
side files (:mod:`store._sidefiles`) depending on their stored size (see
:mod:`store._put` for the measurements behind ``inline_threshold``).  Each
thread and each forked process gets its own connection; writes are retried to
one deadline per operation (:mod:`store._db`).  Nothing a row says is trusted
(:mod:`store._rows`); damage is moved aside (:mod:`store._repair`); a store
that cannot be written opens read-only: gets work, writes raise
StoreReadOnlyError, hits are not counted.  Hits and ``last_used`` are
coalesced, so a get costs no write (:mod:`store._pending`).
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from . import _keysets, _listing, _verify
from ._db import LIVE, Database
from ._entry import Entry, GcResult, VerifyResult
from ._errors import StoreCorruptionWarning, StoreError  # noqa: F401 (tests reach the warning here)
from ._gc import Collector
from ._get import Reader
from ._policy import POLICIES, get_policy
from ._put import Writer
from ._repair import Repair
from ._rows import check_key, checksum_matches, totals
from ._sidefiles import SideFiles

__all__ = ["DB_NAME", "INLINE_THRESHOLD", "Store", "checksum_matches", "policies"]

DB_NAME = "store.db"
LOCK_NAME = "store.lock"
VALUES_DIR = "values"
INLINE_THRESHOLD = 256 * 1024
#: Default bound on one value, raw or stored: what a row may claim before it is
#: refused unread (so a crafted row cannot make a get allocate more).
MAX_VALUE_SIZE = 4 * 2**30
MAX_KEY_SET_LEN = 4096  # keys kept per key set
MAX_KEY_SETS = 1024  # key sets kept per store


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
        _check_arguments(max_bytes, level, busy_timeout, inline_threshold, max_value_size)
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
        # How damage and lost work are reported: a warning by default; an embedding
        # application (pcache) passes its own, e.g. to log instead of warn.
        self._report = report or self._warn_once
        self._reported: set[tuple[str, str]] = set()
        self._db_path = self.directory / DB_NAME
        self._files = SideFiles(self.directory / VALUES_DIR, fsync=fsync)
        self._db = Database(
            self._db_path,
            self.directory / LOCK_NAME,
            busy_timeout=self.busy_timeout,
            flush_threshold=self.flush_threshold,
            flush_interval=self.flush_interval,
            read_only=bool(read_only),
        )
        self._reader, self._writer, self._collector = Reader(self), Writer(self), Collector(self)
        self._repair = Repair(
            self._db,
            enabled=repair,
            report=self._report,
            sweep=self._collector.sweep,
            orphan_grace=self.orphan_grace,
        )
        self._repair.open_store(read_only)
        LIVE.add(self._db)

    # ------------------------------------------------------------------ state

    @property
    def read_only(self) -> bool:
        """True when this store only reads (asked for, or fallen back to); then
        :attr:`read_only_reason` says why."""
        return self._db.read_only

    @property
    def read_only_reason(self) -> str:
        return self._db.read_only_reason

    @property
    def repair(self) -> bool:
        """Whether a damaged database is moved aside and replaced (see ``repair=``)."""
        return self._repair.enabled

    @repair.setter
    def repair(self, value: bool) -> None:
        self._repair.enabled = value

    # For tests and tools: the calling thread's connection, every connection, and
    # the buffered updates (what `close` would flush).
    _con = property(lambda self: self._db.con)
    _cons = property(lambda self: self._db.cons)
    _pending_hits = property(lambda self: self._db.pending.hits)
    _pending_counters = property(lambda self: self._db.pending.counters)
    _pending_n = property(
        lambda self: self._db.pending.n, lambda self, n: setattr(self._db.pending, "n", n)
    )

    def release_connection(self) -> None:
        """Close the calling thread's connection, if it has one.

        For short-lived helper threads: a connection otherwise lives (with its file
        descriptors) until :meth:`close`, and every new thread opens its own.
        """
        self._db.release_connection()

    # ------------------------------------------------- what the parts call back

    def _warn_once(self, message: str, category: type[Warning], cause: str) -> None:
        if (category.__name__, cause) in self._reported:
            return
        self._reported.add((category.__name__, cause))
        warnings.warn(message + " (further ones are not reported)", category, stacklevel=5)

    def _unlink_file(self, name: str) -> None:
        try:
            self._files.unlink(name)
        except OSError as exc:
            # The row is gone already; the file is now an orphan that gc will sweep.
            self._report(
                f"pcache store: could not remove side file {name}: {exc}", UserWarning, "unlink"
            )

    def _valid(self, rows: Iterable[tuple]) -> Iterator[Entry]:
        """Entries of rows (``ENTRY_COLUMNS``), without the ones whose metadata is
        invalid: reported once; a get, gc or ``verify(fix=True)`` removes them."""
        return _listing.valid(rows, self._report, self.directory)

    # ------------------------------------------------------------------ values

    def flush(self) -> None:
        """Write buffered hits, ``last_used`` times and counters now."""
        self._db.flush()

    def put(self, key: str, value: bytes, *, meta: Mapping[str, Any] | None = None) -> None:
        """Store ``value`` under ``key``, replacing any previous value.

        ``meta`` keys: backend, device_kind, jax_version, jaxlib_version,
        function_name (str), compile_seconds (float >= 0), extra (JSON-able dict);
        others raise ValueError.  Evicts by policy afterwards if over ``max_bytes``.
        Raises StoreFullError, StorePermissionError, StoreLockedError.
        """
        self._writer.put(key, value, meta)

    def put_many(
        self,
        entries: Iterable[tuple[str, bytes, Mapping[str, Any] | None]],
        *,
        key_sets: Mapping[str, Iterable[str]] | None = None,
    ) -> int:
        """Store every ``(key, value, meta)`` of ``entries``, and the key sets
        ``key_sets`` (name -> keys, as :meth:`put_key_set`), in one transaction: all
        of them or none, whatever fails, even a crash.  Returns how many entries.

        ``entries`` is consumed one at a time: each value is checked and framed as
        :meth:`put` does (a big one written to its side file) before the next is
        asked for, so the iterable can read values lazily.  If it raises, or any
        value is refused, or the commit fails, nothing is stored and the side files
        written are removed (after a crash they are orphans gc sweeps).  A key given
        twice keeps its last value.  Evicts by policy afterwards, as ``put`` does.
        """
        return self._writer.put_many(entries, key_sets or {}, MAX_KEY_SET_LEN, MAX_KEY_SETS)

    def get(self, key: str) -> bytes | None:
        """The value stored under ``key``, or None.

        The value's checksum is verified; on mismatch the entry is removed, a
        StoreCorruptionWarning is issued, and None is returned.
        """
        got = self._reader.get(key, with_entry=False)
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
        return self._reader.get(key, with_entry=True, touch=touch, verify=verify, admit=admit)

    def touch(self, key: str) -> None:
        """Count a hit on ``key`` and renew its ``last_used`` (coalesced, like a get)."""
        check_key(key)
        self._db.note_hit(key)
        self._db.maybe_flush()

    def delete(self, key: str) -> bool:
        """Remove ``key``; True if it was present."""
        return self._writer.delete(key)

    def clear(self) -> int:
        """Remove every entry and key set; return how many entries.  Counters are kept."""
        return self._writer.clear()

    # ---------------------------------------------------------------- key sets

    def put_key_set(self, name: str, keys: Iterable[str]) -> None:
        """Store the ordered list ``keys`` under ``name`` (replacing it).

        Key sets are hints that the caller keeps (e.g. the keys one program used, in
        order, so its next run can read them ahead).  At most ``MAX_KEY_SET_LEN`` keys
        are kept per set and ``MAX_KEY_SETS`` sets per store (the least recently
        written go first); a key need not name a stored entry.
        """
        text = _keysets.encode(name, keys, MAX_KEY_SET_LEN)
        limit = MAX_KEY_SETS
        self._db.write(f"put key set {name!r}", lambda con: _keysets.write(con, name, text, limit))

    def key_set(self, name: str) -> list[str]:
        """The keys stored under ``name`` by :meth:`put_key_set`; ``[]`` if none."""
        return _keysets.key_set(self._db, name)

    def key_sets(self) -> list[tuple[str, int, float]]:
        """``(name, number of keys, updated)`` of every key set, newest first."""
        return _keysets.key_sets(self._db)

    # ---------------------------------------------------------------- metadata

    def entry(self, key: str) -> Entry | None:
        """Metadata of ``key`` without reading its value, or None."""
        check_key(key)
        row = _listing.entry_row(self._db, key)
        return None if row is None else next(self._valid([row]), None)

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, str):
            return False
        return _listing.contains(self._db, key)

    def __len__(self) -> int:
        return self._db.read("len", lambda con: totals(con)[0])

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
        rows = _listing.entry_rows(
            self._db, self.policy, order_by, descending, limit, older_than, equal
        )
        return self._valid(rows)

    def bump(self, counters: Mapping[str, int | float]) -> None:
        """Add to persisted named counters (coalesced like hits)."""
        for name, value in counters.items():
            if not isinstance(name, str) or not name:
                raise TypeError(f"counter names must be non-empty str, got {name!r}")
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise TypeError(f"counter {name!r}: value must be int or float, got {value!r}")
        if counters:
            self._db.note_counters(counters)
            self._db.maybe_flush()

    def stats(self) -> dict[str, Any]:
        """Sizes and persisted counters, plus this process's not-yet-flushed counts.

        Keys: entries, raw_bytes, stored_bytes, file_bytes, disk_bytes, max_bytes,
        policy, hits, misses, puts, evictions, corrupt, and every bumped counter.
        """
        return _listing.stats(self._db, self.max_bytes, self.policy)

    # ------------------------------------------------------------ gc, verify

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
        return self._collector.gc(limit, older_than, predicate, dry_run, progress)

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
        return _verify.verify(self, fix, progress, admit)

    # ---------------------------------------------------------------- lifetime

    def close(self) -> None:
        """Flush buffered updates and close this process's connections.  Idempotent."""
        if self._db.closed:
            return
        try:
            self._db.check_pid()
            if self._db.pending.n:
                try:
                    self.flush()
                except StoreError as exc:
                    self._report(
                        f"pcache store {self.directory}: lost buffered hit counts at close: {exc}",
                        UserWarning,
                        "close",
                    )
        finally:
            LIVE.discard(self._db)
            self._db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Store({str(self.directory)!r}, max_bytes={self.max_bytes}, policy={self.policy.name!r})"


def _check_arguments(
    max_bytes: object,
    level: object,
    busy_timeout: float,
    inline_threshold: int,
    max_value_size: object,
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


def policies() -> dict[str, str]:
    """Eviction policy names and what they evict first."""
    return {name: p.doc for name, p in POLICIES.items()}
