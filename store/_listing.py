"""Reading metadata without values: one entry, filtered listings, sizes and counters."""

from __future__ import annotations

import math
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from ._db import Database
from ._entry import BadRow, Entry
from ._errors import StoreCorruptionWarning
from ._policy import Policy
from ._rows import COLS, FILTERABLE, ORDERABLE, totals

__all__ = ["BUILTIN_COUNTERS", "contains", "entry_row", "entry_rows", "stats", "valid"]

BUILTIN_COUNTERS = ("hits", "misses", "puts", "evictions", "corrupt")


def valid(
    rows: Iterable[tuple], report: Callable[[str, type[Warning], str], None], directory: Path
) -> Iterator[Entry]:
    """Entries of rows (``ENTRY_COLUMNS``), without the ones whose metadata is
    invalid: reported once; a get, gc or ``verify(fix=True)`` removes them."""
    for row in rows:
        try:
            yield Entry.from_row(row)
        except BadRow as exc:
            report(
                f"pcache store {directory}: entry {row[0]!r} has bad metadata ({exc}); skipped",
                StoreCorruptionWarning,
                "bad metadata",
            )


def contains(db: Database, key: str) -> bool:
    return (
        db.read(
            "contains",
            lambda con: con.execute("SELECT 1 FROM entries WHERE key = ?", (key,)).fetchone(),
        )
        is not None
    )


def entry_row(db: Database, key: str) -> tuple | None:
    return db.read(
        f"entry {key!r}",
        lambda con: con.execute(f"SELECT {COLS} FROM entries WHERE key = ?", (key,)).fetchone(),
    )


def entry_rows(
    db: Database,
    policy: Policy,
    order_by: str,
    descending: bool,
    limit: int | None,
    older_than: float | None,
    equal: dict[str, str],
) -> list[tuple]:
    """The rows ``Store.entries`` lists, read in one statement (a consistent snapshot)."""
    if order_by == "eviction":
        order = policy.order_by
    elif order_by in ORDERABLE:
        order = order_by
    else:
        raise ValueError(f"order_by must be 'eviction' or one of {sorted(ORDERABLE)}")
    where, params = [], []
    for name, value in equal.items():
        if name not in FILTERABLE:
            raise TypeError(f"unknown filter {name!r}; valid: {list(FILTERABLE)}")
        where.append(f"{name} = ?")
        params.append(value)
    if older_than is not None:
        where.append("last_used <= ?")
        params.append(time.time() - older_than)
    sql = f"SELECT {COLS} FROM entries"
    if where:
        sql += " WHERE " + " AND ".join(where)
    sql += f" ORDER BY {order} {'DESC' if descending else 'ASC'}"
    if limit is not None:
        sql += f" LIMIT {int(limit)}"
    return db.read("listing entries", lambda con: con.execute(sql, params).fetchall())


def stats(db: Database, max_bytes: int | None, policy: Policy) -> dict[str, Any]:
    """Sizes and persisted counters, plus this process's not-yet-flushed counts."""

    def read(con: sqlite3.Connection) -> tuple:
        return totals(con), con.execute("SELECT name, value FROM counters").fetchall()

    (n, raw, stored, file_bytes), counters = db.read("stats", read)
    out: dict[str, Any] = {
        "entries": n,
        "raw_bytes": raw,
        "stored_bytes": stored,
        "file_bytes": file_bytes,
        "disk_bytes": db.disk_bytes() + file_bytes,
        "max_bytes": max_bytes,
        "policy": policy.name,
    }
    sizes = set(out)
    out.update(dict.fromkeys(BUILTIN_COUNTERS, 0))
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
    for name, v in db.pending.counter_snapshot().items():
        out[name] = out.get(name, 0) + v
    return out
