"""Reading values: a row, its bytes (read only at their recorded size), checked.

A row found bad (its metadata, its side file, its frame or its checksum) is a
corrupt entry: reported once per cause, and removed unless the store is
read-only.  A reader tells the row it read from a replacement that took its
rowid (``_rows.SAME_ROW``), and looks again when a concurrent put moved the value.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import TYPE_CHECKING

from ._entry import Entry
from ._errors import StoreCorruptionWarning, StoreLockedError, StoreReadOnlyError, translate
from ._pending import add_counters
from ._rows import E_COLS, SAME_ROW, cause, check_key, check_value, parse, row_identity
from ._sidefiles import SideFiles, SizeMismatch

if TYPE_CHECKING:
    from ._store import Store

__all__ = ["Reader"]

_GET = (
    f"SELECT e.id, e.file, length(b.data), {E_COLS} "
    "FROM entries e LEFT JOIN blobs b ON b.id = e.id WHERE e.key = ?"
)


class Reader:
    """The get path of one store."""

    def __init__(self, store: Store) -> None:
        self.s = store

    def get(
        self,
        key: str,
        *,
        with_entry: bool,
        touch: bool = True,
        verify: bool = True,
        admit: Callable[[Entry], None] | None = None,
    ) -> tuple[bytes, Entry | None] | None:
        check_key(key)
        s = self.s
        for _ in range(3):  # retried only when a concurrent overwrite moved the value
            row = s._db.read(f"get {key!r}", lambda con: con.execute(_GET, (key,)).fetchone())
            if row is None:
                self._miss(touch)
                return None
            rowid, file, blob_len = row[:3]
            entry, problem = parse(row[3:], file, s.max_value_size)
            if problem is None and admit is not None:
                admit(entry)
            data = None
            if problem is None:
                data, problem = self.read_value(rowid, file, blob_len, entry)
                if data is None and problem is None:
                    continue  # overwritten or deleted meanwhile: look again
            if problem is None:
                problem = check_value(
                    data, entry.codec, entry.raw_size, entry.stored_size,
                    entry.checksum if verify else None,
                )  # fmt: skip
            if isinstance(problem, str):
                self.corrupt(key, rowid, file, problem, entry)
                self._miss(touch)
                return None
            if touch:
                s._db.note_hit(key)
                s._db.maybe_flush()
            return problem, (entry if with_entry else None)
        self._miss(touch)
        return None

    def _miss(self, touch: bool) -> None:
        if touch:
            self.s._db.note_counters({"misses": 1})
            self.s._db.maybe_flush()

    def read_value(
        self, rowid: int, file: str | None, blob_len: int | None, entry: Entry
    ) -> tuple[bytes | None, str | None]:
        """The stored bytes of a row, read only if their size is the recorded one:
        ``(data, None)``, ``(None, problem)``, or ``(None, None)`` when the row
        changed under us."""
        if file is not None:
            try:
                return self.s._files.read(file, entry.stored_size), None
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
        row = self.s._db.read(
            "reading value",
            lambda con: con.execute(
                "SELECT b.data FROM blobs b JOIN entries e ON e.id = b.id WHERE b.id = ? AND "
                + SAME_ROW,
                (rowid, *row_identity(entry)),
            ).fetchone(),
        )
        return (None, None) if row is None else (row[0], None)

    def _row_unchanged(self, rowid: int, entry: Entry) -> bool:
        return (
            self.s._db.read(
                "checking entry",
                lambda con: con.execute(
                    "SELECT 1 FROM entries e WHERE e.id = ? AND " + SAME_ROW,
                    (rowid, *row_identity(entry)),
                ).fetchone(),
            )
            is not None
        )

    def corrupt(
        self, key: str, rowid: int, file: str | None, problem: str, entry: Entry | None = None
    ) -> None:
        s = self.s
        s._report(
            f"pcache store {s.directory}: entry {key!r} is corrupt ({problem}); "
            + ("left in place (read-only)" if s.read_only else "removed"),
            StoreCorruptionWarning,
            cause(problem),
        )
        if s.read_only:
            return
        stored_file = file  # as the row has it, to match the row by
        if not (isinstance(file, str) and SideFiles.valid_name(file)):
            file = None  # never unlinked: not a name of ours

        deleted: list[int] = []

        def txn(con: sqlite3.Connection) -> None:
            # Only the row we read: a concurrent put may have replaced it already, and
            # its row may have the same id (see SAME_ROW). Side-file names are unique.
            sql, args = "DELETE FROM entries AS e WHERE e.id = ? AND e.key = ? AND e.file IS ?", [
                rowid, key, stored_file,
            ]  # fmt: skip
            if entry is not None:
                sql += " AND " + SAME_ROW
                args += row_identity(entry)
            deleted[:] = [con.execute(sql, args).rowcount]
            if deleted[0]:
                add_counters(con, {"corrupt": 1})

        try:
            s._db.write(f"removing corrupt entry {key!r}", txn)
        except (StoreLockedError, StoreReadOnlyError):
            return  # still detected (and removed) on the next read
        if file is not None and deleted and deleted[0]:
            s._unlink_file(file)
