"""Opening a store's database: schema creation and upgrade, and what is done with damage.

A database SQLite calls corrupt (confirmed by ``quick_check``) is moved aside as
``store.db.damaged-*`` (the newest KEEP_DAMAGED kept for inspection) and
replaced by an empty one, unless repair is off; a newer schema is never
touched, and a SQLite database that is not a store is moved aside like damage.
"""

from __future__ import annotations

import contextlib
import errno
import math
import os
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

import filelock

from . import _schema
from ._db import Database, identity, is_damage, user_version
from ._errors import (
    StoreCorruptError,
    StoreCorruptionWarning,
    StoreError,
    StoreLockedError,
    StorePermissionError,
    StoreVersionError,
    translate,
)

__all__ = ["KEEP_DAMAGED", "SWEEP_INTERVAL", "Repair"]

KEEP_DAMAGED = 2  # damaged databases kept aside for inspection
SWEEP_INTERVAL = 86400.0  # seconds between orphan sweeps done at open (gc always sweeps)

Report = Callable[[str, type[Warning], str], None]


class _ForeignDatabase(StoreCorruptError):
    """store.db is a SQLite database, but not one a Store wrote."""


class Repair:
    """Schema and damage handling of one store's database.

    ``sweep(grace)`` removes crash leftovers (the store's gc); it is run at open
    when nobody has for SWEEP_INTERVAL.
    """

    def __init__(
        self,
        db: Database,
        *,
        enabled: bool,
        report: Report,
        sweep: Callable[[float], object],
        orphan_grace: float,
    ) -> None:
        self.db = db
        self.enabled = enabled
        self.report = report
        self.sweep = sweep
        self.orphan_grace = orphan_grace
        self.quarantining = False
        db.on_damage = self.on_damage

    @property
    def directory(self) -> Path:
        return self.db.path.parent

    def open_store(self, read_only: bool | None) -> None:
        """Create the directory and open the database: for writing, falling back to
        reading only where it cannot be written (unless ``read_only`` said which)."""
        db = self.db
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise translate(exc, f"creating store directory {self.directory}") from exc
        if read_only is None and not self._writable():
            db.go_read_only("the directory or database is not writable")
        try:
            self.open()
        except (StoreVersionError, StoreCorruptError, StoreLockedError):
            raise
        except StoreError as exc:
            # Permission, a full disk (SQLite cannot size its WAL index: "disk I/O
            # error"), a read-only mount: what cannot be written may still be read.
            if read_only is not None or db.read_only:
                raise
            db.go_read_only(f"opening it for writing failed ({exc})")
            self.open()

    def _writable(self) -> bool:
        if not os.access(self.directory, os.W_OK):
            return False
        return not self.db.path.exists() or os.access(self.db.path, os.W_OK)

    def open(self) -> None:
        if self.db.read_only:
            self._open_read_only()
            return
        version = self.db.read("reading schema version", user_version)
        if version != _schema.SCHEMA_VERSION:
            self._upgrade(version)
        self._maybe_sweep()

    def _open_read_only(self) -> None:
        db = self.db
        if not db.path.exists():
            raise StorePermissionError(
                errno.EACCES,
                f"{db.path} does not exist and {self.directory} cannot be written "
                f"({db.read_only_reason})",
            )
        try:
            version = db.read("reading schema version", user_version)
        except (StoreCorruptError, StoreVersionError, StoreLockedError):
            raise
        except StoreError:  # no -shm and none can be made (read-only, or a full disk)
            db.immutable = True
            db.drop_connections()
            version = db.read("reading schema version", user_version)
        if version != _schema.SCHEMA_VERSION:
            raise StoreVersionError(
                f"{db.path} has schema version {version} and this pcache reads "
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

        if time.time() - self.db.read("reading last sweep time", last) < SWEEP_INTERVAL:
            return
        try:
            self.db.flock.acquire(timeout=0)
        except filelock.Timeout:  # a gc (which sweeps) or another opener holds it
            return
        try:
            self.sweep(self.orphan_grace)
        except StoreLockedError:  # busy writers: try again at the next open
            pass
        finally:
            self.db.flock.release()

    def _upgrade(self, version: int) -> None:
        db = self.db
        if version < 0 or (version > _schema.SCHEMA_VERSION and not self._looks_like_a_store()):
            self.quarantine(f"impossible schema version {version}")
            return
        if version > _schema.SCHEMA_VERSION:
            raise StoreVersionError(
                f"{db.path} has schema version {version}; this pcache understands "
                f"<= {_schema.SCHEMA_VERSION}. Upgrade pcache or use another directory."
            )
        with db.file_lock("creating/migrating the schema"):
            version = db.read("reading schema version", user_version)
            if version == _schema.SCHEMA_VERSION:
                return  # another process did it while we waited
            if version == 0:
                try:
                    self._create()
                except _ForeignDatabase as exc:
                    if not self.enabled:
                        raise
                    self.quarantine(str(exc), locked=True)
            else:
                db.write(
                    f"migrating schema {version} -> {_schema.SCHEMA_VERSION}",
                    lambda con: _schema.migrate(con, version),
                    flush=False,
                )

    def _create(self) -> None:
        db = self.db

        def tables(con: sqlite3.Connection) -> list[str]:
            return [r[0] for r in con.execute("SELECT name FROM sqlite_master")]

        existing = db.read("inspecting database", tables)
        if existing:
            raise _ForeignDatabase(
                f"{db.path} is a SQLite database but not a pcache store "
                f"(user_version 0, tables {existing[:5]})"
            )

        def pragmas() -> None:
            con = db.con()
            con.execute("PRAGMA auto_vacuum = INCREMENTAL")  # only effective before tables
            con.execute("PRAGMA journal_mode = WAL")  # persistent in the file

        db.retry("configuring database", pragmas)

        def create(con: sqlite3.Connection) -> None:
            _schema.create(con)
            now = repr(time.time())
            con.executemany(
                "INSERT OR REPLACE INTO meta (name, value) VALUES (?, ?)",
                [("created", now), ("last_sweep", now)],
            )

        db.write("creating schema", create, flush=False)

    def _looks_like_a_store(self) -> bool:
        """A newer pcache's database (left alone) rather than damage: it has our tables."""

        def tables(con: sqlite3.Connection) -> set[str]:
            return set(_schema.shape(con))

        return {"table entries", "table meta"} <= self.db.read("inspecting database", tables)

    def on_damage(self, why: str, exc: BaseException) -> bool:
        """SQLite reported damage: True when the database was damaged and replaced."""
        if not self.damaged():
            return False
        self.quarantine(why)
        return True

    def damaged(self) -> bool:
        """Whether the database itself is damaged (not a transient error): asked once
        SQLite reported corruption, by a check of the whole file."""
        if not self.enabled or self.db.read_only or self.quarantining:
            return False
        try:
            con = sqlite3.connect(self.db.path, timeout=min(self.db.busy_timeout, 1.0))
            try:
                lines = [r[0] for r in con.execute("PRAGMA quick_check(1)").fetchall()]
            finally:
                con.close()
        except sqlite3.Error as check:
            return is_damage(check)
        return lines != ["ok"]

    def quarantine(self, why: str, *, locked: bool = False, force: bool = False) -> None:
        """Move the damaged database aside (kept for inspection, the newest few) and
        open an empty one in its place.  Another process may have done it already:
        the file is only moved while it is still the one this store opened.
        ``force``: even when repair is off (verify's ``fix``)."""
        db = self.db
        if not (self.enabled or force) or db.read_only:
            raise StoreCorruptError(f"{db.path} is damaged: {why}")
        mine = db.identity()
        self.quarantining = True
        try:
            lock = (
                contextlib.nullcontext() if locked else db.file_lock("replacing a damaged database")
            )
            with lock:
                current = identity(db.path)
                db.drop_connections()
                if current is not None and (mine is None or current == mine):
                    dest = self._move_aside()
                    self.report(
                        f"pcache store {self.directory}: the database was damaged ({why}); "
                        f"moved it aside to {dest.name} and started an empty store",
                        StoreCorruptionWarning,
                        "database",
                    )
                # else another process replaced it already: use theirs.
                if db.read("reading schema version", user_version) == 0:
                    self._create()
        finally:
            self.quarantining = False

    def _move_aside(self) -> Path:
        path = self.db.path
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
        dest = self.directory / f"{path.name}.damaged-{stamp}-{os.getpid()}"
        # The WAL and its index first: a new database must never meet the old WAL.
        for suffix in ("-wal", "-shm", "", "-wal", "-shm"):
            with contextlib.suppress(FileNotFoundError):
                os.replace(f"{path}{suffix}", f"{dest}{suffix}")
        old = sorted(self.directory.glob(f"{path.name}.damaged-*[0-9]"), key=os.path.getmtime)
        for aside in old[:-KEEP_DAMAGED]:
            for suffix in ("", "-wal", "-shm"):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(f"{aside}{suffix}")
        return dest
