"""verify: SQLite's integrity, every entry's metadata and bytes, orphan side files.

With ``fix``, bad entries and old orphans are removed, and a database that fails
its integrity check even after a reindex and a restored schema is moved aside
and replaced by an empty one (even when the store was opened with
``repair=False``: fixing was asked for).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from . import _schema
from ._entry import Entry, VerifyResult
from ._evict import delete_ids
from ._rows import E_COLS, check_value, parse

if TYPE_CHECKING:
    from ._store import Store

__all__ = ["verify"]

_LIST = (
    f"SELECT e.id, e.file, length(b.data), {E_COLS} "
    "FROM entries e LEFT JOIN blobs b ON b.id = e.id ORDER BY e.id"
)


@dataclass
class _Found:
    corrupt: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    reasons: dict[str, str] = field(default_factory=dict)
    bad_ids: list[int] = field(default_factory=list)


def verify(
    s: Store,
    fix: bool,
    progress: Callable[[int, int], None] | None,
    admit: Callable[[Entry], None] | None,
) -> VerifyResult:
    integrity = _integrity(s)
    replaced = None
    if integrity and fix and not s.read_only:
        s._db.retry("verify: reindex", lambda: s._db.con().execute("REINDEX"))
        s._db.write("verify: restoring the schema", _schema.restore, flush=False)
        integrity = _integrity(s)
        if integrity:
            s._repair.quarantine("; ".join(integrity[:3]), force=True)
            replaced = integrity
    rows = s._db.read("verify: listing", lambda con: con.execute(_LIST).fetchall())
    listing = s._files.listing()
    found = _Found()
    for n, row in enumerate(rows, 1):
        _check_row(s, row, admit, found)
        if progress:
            progress(n, len(rows))
    orphans = _orphans(s, rows, listing)
    fixed = 0
    if fix and not s.read_only:
        if found.bad_ids:
            delete_ids(s._db, s._unlink_file, found.bad_ids, None, counter="corrupt")
            fixed += len(found.bad_ids)
        for name in orphans:
            s._unlink_file(name)
            fixed += 1
    return VerifyResult(
        checked=len(rows),
        integrity=replaced or integrity,
        corrupt=found.corrupt,
        missing=found.missing,
        orphans=orphans,
        fixed=fixed,
        reasons=found.reasons,
        replaced=replaced is not None,
    )


def _check_row(s: Store, row: tuple, admit: Callable[[Entry], None] | None, found: _Found) -> None:
    rowid, file, blob_len = row[:3]
    key = row[3] if isinstance(row[3], str) else repr(row[3])
    entry, problem = parse(row[3:], file, s.max_value_size)
    if problem is None and admit is not None:
        try:
            admit(entry)
        except Exception as exc:  # whatever the caller refuses an entry with
            problem = str(exc) or type(exc).__name__
    data = None
    if problem is None:
        data, problem = s._reader.read_value(rowid, file, blob_len, entry)
    if problem is None and data is not None:
        checked = check_value(data, entry.codec, entry.raw_size, entry.stored_size, entry.checksum)
        problem = checked if isinstance(checked, str) else None
    if problem is not None:
        (found.missing if "missing" in problem else found.corrupt).append(key)
        found.reasons[key] = problem
        found.bad_ids.append(rowid)


def _orphans(s: Store, rows: list[tuple], listing: dict[str, tuple[float, int]]) -> list[str]:
    """Side files no row names, older than the grace."""
    referenced = {r[1] for r in rows if isinstance(r[1], str)}
    now = time.time()
    orphans = sorted(
        name
        for name, (mtime, _) in listing.items()
        if name not in referenced and now - mtime >= s.orphan_grace
    )
    # A file committed after our listing of rows is not an orphan.
    if orphans:
        live = s._db.read(
            "verify: re-reading side files",
            lambda con: {r[0] for r in con.execute("SELECT file FROM entries WHERE file NOT NULL")},
        )
        orphans = [o for o in orphans if o not in live]
    return orphans


def _integrity(s: Store) -> list[str]:
    """SQLite's integrity check, and what the database lacks of the schema."""
    lines = s._db.read(
        "verify: integrity_check",
        lambda con: [r[0] for r in con.execute("PRAGMA integrity_check").fetchall()],
    )
    lines = [line for line in lines if line != "ok"]
    return lines + s._db.read("verify: schema", _schema.shape_problems)
