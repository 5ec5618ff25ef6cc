"""Eviction and batch deletes: which rows go to keep the stored bytes under a limit.

The policy's index is read from its start and reading stops as soon as enough is
found (the totals the triggers keep say how much is over), so a put over the
limit never scans the table.  Rows go first, side files after the commit.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Mapping

from ._db import Database
from ._entry import Entry
from ._pending import add_counters
from ._policy import Policy
from ._rows import COLS, count, totals

__all__ = ["delete_ids", "delete_rows", "victims"]


def victims(
    con: sqlite3.Connection, policy: Policy, limit: int, skip: Mapping[int, Entry] | None = None
) -> list[tuple]:
    """Rows ``(id, stored_size, file, *ENTRY_COLUMNS)`` to remove, in policy order, so
    that the stored bytes left (not counting ``skip``, already going) are <= limit."""
    total = totals(con)[2]
    if skip:
        total -= sum(e.stored_size for e in skip.values())
    excess = total - limit
    out: list[tuple] = []
    if excess <= 0:
        return out
    cur = con.execute(
        f"SELECT id, stored_size, file, {COLS} FROM entries ORDER BY {policy.order_by}"
    )
    for row in cur:
        if skip and row[0] in skip:
            continue
        out.append(row)
        excess -= count(row[1])  # a row with a bad size goes, and frees nothing we know
        if excess <= 0:
            break
    cur.close()
    return out


def delete_rows(con: sqlite3.Connection, rows: list[tuple]) -> list[str]:
    """Delete rows chosen by :func:`victims`; return their side files (to unlink after
    the commit)."""
    con.executemany("DELETE FROM entries WHERE id = ?", [(r[0],) for r in rows])
    return [r[2] for r in rows if r[2]]


def delete_ids(
    db: Database,
    unlink: Callable[[str], None],
    ids: list[int],
    progress: Callable[[int, int], None] | None,
    counter: str | None,
    batch: int = 20_000,
) -> int:
    """Delete rows by id in batches, counting them in ``counter``; return stored
    bytes freed.

    A batch holds the write lock ~0.3 s on the bench box; batches of 2,000 made
    gc 2x slower (a commit, and often a WAL checkpoint, per batch)."""
    freed = 0
    total = len(ids)
    if progress:
        progress(0, total)
    for i in range(0, total, batch):
        chunk = ids[i : i + batch]
        files: list[str] = []

        def txn(con: sqlite3.Connection, chunk: list[int] = chunk, files: list[str] = files) -> int:
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
                add_counters(con, {counter: len(rows)})
            return sum(count(r[1]) for r in rows)

        freed += db.write("gc: deleting entries", txn)
        for name in files:
            unlink(name)
        if progress:
            progress(min(i + batch, total), total)
    return freed
