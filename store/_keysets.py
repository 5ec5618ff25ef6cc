"""Key sets: ordered lists of keys kept under a name, as hints for their caller.

(e.g. the keys one program used, in order, so that its next run can read them
ahead).  A key need not name a stored entry; an unreadable set reads as empty,
never as an error.  At most ``max_len`` keys are kept per set and ``max_sets``
sets per store, the least recently written going first.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterable

from ._db import Database
from ._rows import check_key, json_len

__all__ = ["key_set", "key_sets", "encode", "write"]


def encode(name: str, keys: Iterable[str], max_len: int) -> str:
    """The stored text of the key set ``name`` (checked: str names and keys)."""
    check_key(name)
    keys = list(keys)
    for k in keys:
        check_key(k)
    return json.dumps(keys[:max_len], separators=(",", ":"))


def write(con: sqlite3.Connection, name: str, text: str, max_sets: int) -> None:
    """Replace the key set ``name`` by ``text`` (from :func:`encode`), in the caller's
    transaction, and drop the oldest sets beyond ``max_sets``."""
    con.execute(
        "INSERT OR REPLACE INTO key_sets (name, keys, updated) VALUES (?, ?, ?)",
        (name, text, time.time()),
    )
    con.execute(
        "DELETE FROM key_sets WHERE name NOT IN "
        "(SELECT name FROM key_sets ORDER BY updated DESC LIMIT ?)",
        (max_sets,),
    )


def key_set(db: Database, name: str) -> list[str]:
    check_key(name)
    row = db.read(
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


def key_sets(db: Database) -> list[tuple[str, int, float]]:
    rows = db.read(
        "listing key sets",
        lambda con: con.execute(
            "SELECT name, keys, updated FROM key_sets ORDER BY updated DESC"
        ).fetchall(),
    )
    return [(name, json_len(keys), updated) for name, keys, updated in rows]
