"""What every part of the store says about rows: column lists, checks, totals.

Nothing a row says is trusted: every value read is type- and range-checked (a
bad row is a corrupt entry), no value claiming more than ``max_value_size`` is
read, and a zstd frame whose header claims another size than the row is refused
before anything is inflated.
"""

from __future__ import annotations

import json
import re
import sqlite3

from . import _codec
from ._entry import ENTRY_COLUMNS, BadRow, Entry
from ._sidefiles import SideFiles

__all__ = ["COLS", "E_COLS", "SAME_ROW", "check_key", "check_value", "checksum_matches"]

COLS = ", ".join(ENTRY_COLUMNS)
E_COLS = ", ".join(f"e.{c}" for c in ENTRY_COLUMNS)
ORDERABLE = frozenset(ENTRY_COLUMNS) - {"extra"}
FILTERABLE = ("backend", "device_kind", "jax_version", "jaxlib_version", "function_name")

# The row a reader read, and not another that took its rowid since: SQLite gives
# a new row the highest rowid + 1, so a put that replaces the newest entry reuses
# its id. Key, creation time and checksum tell them apart.
SAME_ROW = "e.key = ? AND e.created = ? AND e.checksum = ?"


def row_identity(entry: Entry) -> tuple:
    return (entry.key, entry.created, entry.checksum)


def parse(row: tuple, file: object, max_value_size: int) -> tuple[Entry | None, str | None]:
    """A row's Entry, or what is wrong with it: wrong types, a value bigger than
    ``max_value_size``, a side-file name that is not one of ours."""
    try:
        entry = Entry.from_row(row)
    except BadRow as exc:
        return None, f"bad metadata: {exc}"
    if max(entry.raw_size, entry.stored_size) > max_value_size:
        return None, (
            f"claims {max(entry.raw_size, entry.stored_size)} bytes, over "
            f"max_value_size={max_value_size}"
        )
    if file is not None and not (isinstance(file, str) and SideFiles.valid_name(file)):
        return None, f"bad side-file name {file!r}"
    return entry, None


def check_key(key: object) -> None:
    if not isinstance(key, str):
        raise TypeError(f"key must be a str, got {type(key).__name__}")


def checksum_matches(raw: bytes, checksum: str) -> bool:
    """True when ``raw`` has the recorded ``checksum`` (an Entry's ``checksum`` field)."""
    return _codec.matches(raw, checksum)


def check_value(
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


def cause(problem: str) -> str:
    """A corruption problem without its particulars (sizes, names): one report each."""
    return re.sub(r"\d+|'.*'|\".*\"", "N", problem.split(":")[0])


def count(v: object) -> int:
    return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else 0


def json_len(text: str) -> int:
    try:
        value = json.loads(text)
    except ValueError:
        return 0
    return len(value) if isinstance(value, list) else 0


def totals(con: sqlite3.Connection) -> tuple[int, int, int, int]:
    """``(entries, raw_bytes, stored_bytes, file_bytes)`` as the triggers keep them, or
    counted afresh if the totals row is missing or holds anything but counts."""
    row = con.execute(
        "SELECT entries, raw_bytes, stored_bytes, file_bytes FROM totals WHERE id = 0"
    ).fetchone()
    if row is not None and all(count(v) == v for v in row):
        return row
    n, raw, stored, files = con.execute(
        "SELECT count(*), "
        "total(CASE WHEN typeof(raw_size) = 'integer' THEN raw_size END), "
        "total(CASE WHEN typeof(stored_size) = 'integer' THEN stored_size END), "
        "total(CASE WHEN typeof(stored_size) = 'integer' AND file NOT NULL "
        "THEN stored_size END) FROM entries"
    ).fetchone()
    return n, int(raw), int(stored), int(files)
