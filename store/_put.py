"""Writing values: put, put_many (all or nothing), delete, clear.

A value is framed by :mod:`store._codec` before any lock is taken, and kept
inline (table ``blobs``) or in a side file written durably first
(:mod:`store._sidefiles`); the row naming it commits after.  So a crash leaves
either the committed rows, or orphan side files that gc sweeps after a grace.
``put_many`` prepares every value this way, one at a time as its iterable yields
them, then inserts every row in one transaction: a crash, an exception from the
iterable or a failed commit leaves none of them stored.

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
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from . import _codec, _keysets
from ._entry import validate_meta
from ._errors import translate
from ._evict import delete_rows, victims
from ._pending import add_counters
from ._policy import cost_log
from ._rows import COLS, check_key

if TYPE_CHECKING:
    from ._store import Store

__all__ = ["Writer"]

_INSERT = f"INSERT INTO entries ({COLS}, file, cost_log) VALUES ({', '.join('?' * 17)})"


@dataclass(frozen=True)
class _Prepared:
    """One value ready to insert: its row, and its stored bytes or its side file."""

    key: str
    row: tuple
    inline: bytes | None
    file: str | None


class Writer:
    """The write path of one store."""

    def __init__(self, store: Store) -> None:
        self.s = store

    def put(self, key: str, value: bytes, meta: Mapping[str, Any] | None) -> None:
        p = self._prepare(key, value, meta)
        try:
            self._commit([p], f"put {key!r}")
        except BaseException:
            self._discard([p])
            raise

    def put_many(
        self,
        entries: Iterable[tuple[str, bytes, Mapping[str, Any] | None]],
        key_sets: Mapping[str, Iterable[str]],
        max_len: int,
        max_sets: int,
    ) -> int:
        done: list[_Prepared] = []
        try:
            sets = {name: _keysets.encode(name, keys, max_len) for name, keys in key_sets.items()}
            for key, value, meta in entries:
                done.append(self._prepare(key, value, meta))
            if done or sets:
                self._commit(done, f"put of {len(done)} entries", sets, max_sets)
        except BaseException:
            self._discard(done)
            raise
        return len(done)

    def _prepare(self, key: str, value: bytes, meta: Mapping[str, Any] | None) -> _Prepared:
        """Check and frame one value; a big one is written to its side file now."""
        s = self.s
        check_key(key)
        if not isinstance(value, (bytes, bytearray, memoryview)):
            raise TypeError(f"value must be bytes-like, got {type(value).__name__}")
        raw = bytes(value)
        m = validate_meta(meta)
        if len(raw) > s.max_value_size:
            raise ValueError(f"value of {len(raw)} bytes exceeds max_value_size={s.max_value_size}")
        s._db.refuse_if_read_only(f"put {key!r}")
        stored, codec = _codec.encode(raw, s.level)
        digest = _codec.checksum(raw)
        file = None
        if len(stored) >= s.inline_threshold:
            try:
                file = s._files.write(stored)
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
        return _Prepared(key, row, None if file else stored, file)

    def _commit(
        self,
        prepared: list[_Prepared],
        what: str,
        sets: Mapping[str, str] | None = None,
        max_sets: int = 0,
    ) -> None:
        """Insert ``prepared`` (replacing entries of their keys) and ``sets`` in one
        transaction, then evict by policy to ``max_bytes``."""
        s = self.s
        unlink: list[str] = []

        def txn(con: sqlite3.Connection) -> None:
            unlink.clear()
            for p in prepared:
                old = con.execute("SELECT id, file FROM entries WHERE key = ?", (p.key,)).fetchone()
                if old is not None:
                    con.execute("DELETE FROM entries WHERE id = ?", (old[0],))
                    if old[1]:
                        unlink.append(old[1])
                cur = con.execute(_INSERT, p.row)
                if p.file is None:
                    con.execute(
                        "INSERT INTO blobs (id, data) VALUES (?, ?)", (cur.lastrowid, p.inline)
                    )
            for name, text in (sets or {}).items():
                _keysets.write(con, name, text, max_sets)
            evicted = 0
            if s.max_bytes is not None:
                gone = victims(con, s.policy, s.max_bytes)
                evicted = len(gone)
                unlink.extend(delete_rows(con, gone))
            add_counters(con, {"puts": len(prepared), "evictions": evicted})

        s._db.write(what, txn)
        for name in unlink:
            s._unlink_file(name)

    def _discard(self, prepared: list[_Prepared]) -> None:
        for p in prepared:
            if p.file is not None:
                self.s._files.unlink(p.file)

    def delete(self, key: str) -> bool:
        check_key(key)
        found: list[str | None] = []

        def txn(con: sqlite3.Connection) -> bool:
            found.clear()
            row = con.execute("SELECT id, file FROM entries WHERE key = ?", (key,)).fetchone()
            if row is None:
                return False
            con.execute("DELETE FROM entries WHERE id = ?", (row[0],))
            found.append(row[1])
            return True

        removed = self.s._db.write(f"delete {key!r}", txn)
        if found and found[0]:
            self.s._unlink_file(found[0])
        return removed

    def clear(self) -> int:
        files: list[str] = []

        def txn(con: sqlite3.Connection) -> int:
            files[:] = [r[0] for r in con.execute("SELECT file FROM entries WHERE file NOT NULL")]
            con.execute("DELETE FROM key_sets")
            return con.execute("DELETE FROM entries").rowcount

        n = self.s._db.write("clear", txn)
        for name in files:
            self.s._unlink_file(name)
        return n
