"""Loading ``schemas/store.sql`` and bringing a database to the current version."""

from __future__ import annotations

import importlib.readers  # noqa: F401  (what ``files()`` imports on first use, imported
import importlib.resources  # now: a persisted trace key holds the names of a library's
import importlib.resources.readers  # noqa: F401  (``importlib``: diffrax's), review 117
import math
import re
import sqlite3
from functools import cache

__all__ = ["SCHEMA_VERSION", "sections", "shape", "shape_problems", "statements"]

#: ``PRAGMA user_version`` of a database this code writes.
SCHEMA_VERSION = 3

_SECTION = re.compile(r"^-- @section (.+?)\s*$", re.MULTILINE)


@cache
def sections() -> dict[str, str]:
    """The named sections of store.sql: ``"create"`` and ``"migrate N"`` for each step."""
    text = (
        importlib.resources.files(f"{__package__}.schemas").joinpath("store.sql").read_text("utf-8")
    )
    parts = _SECTION.split(text)
    # parts = [preamble, name1, body1, name2, body2, ...]
    out = {name: body for name, body in zip(parts[1::2], parts[2::2], strict=True)}
    missing = [f"migrate {v}" for v in range(2, SCHEMA_VERSION + 1) if f"migrate {v}" not in out]
    if "create" not in out or missing:
        raise RuntimeError(f"store.sql lacks sections: {['create'] + missing}")
    return out


def statements(sql: str) -> list[str]:
    """Split a section into complete statements (trigger bodies contain ';')."""
    out: list[str] = []
    buf = ""
    for line in sql.splitlines(keepends=True):
        if not buf and (not line.strip() or line.lstrip().startswith("--")):
            continue
        buf += line
        if sqlite3.complete_statement(buf):
            out.append(buf.strip())
            buf = ""
    if buf.strip():
        raise RuntimeError(f"incomplete statement in store.sql: {buf[:200]!r}")
    return out


def _log2(x: float) -> float:
    return math.log2(x) if x and x > 0 else 0.0


def register_functions(con: sqlite3.Connection) -> None:
    """SQL functions the migrate sections may call."""
    con.create_function("pcache_log2", 1, _log2, deterministic=True)


def create(con: sqlite3.Connection) -> None:
    """Create the current schema; the caller holds a write transaction."""
    for stmt in statements(sections()["create"]):
        con.execute(stmt)
    con.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")


def restore(con: sqlite3.Connection) -> None:
    """Create what the database lacks of the current schema (every statement of the
    ``create`` section is ``IF NOT EXISTS``); the caller holds a write transaction."""
    for stmt in statements(sections()["create"]):
        con.execute(stmt)


def migrate(con: sqlite3.Connection, from_version: int) -> None:
    """Apply each step from ``from_version`` to :data:`SCHEMA_VERSION`; the caller holds a
    write transaction (so a failed step leaves the old version intact)."""
    register_functions(con)
    for v in range(from_version + 1, SCHEMA_VERSION + 1):
        for stmt in statements(sections()[f"migrate {v}"]):
            con.execute(stmt)
    con.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")


def shape(con: sqlite3.Connection) -> dict[str, tuple[str, ...]]:
    """Every table and index of a database, with a table's columns (what a store's
    schema is made of), read with sqlite-utils' introspection."""
    import sqlite_utils  # the CLI's dependency too; imported only when asked

    db = sqlite_utils.Database(con)
    out: dict[str, tuple[str, ...]] = {}
    for name in db.table_names():
        table = db[name]
        out[f"table {name}"] = tuple(table.columns_dict)
        for index in table.indexes:
            out[f"index {index.name}"] = ()
        for trigger in table.triggers:
            out[f"trigger {trigger.name}"] = ()
    return out


@cache
def expected_shape() -> dict[str, tuple[str, ...]]:
    """The shape of a database created from the current ``create`` section."""
    con = sqlite3.connect(":memory:")
    try:
        create(con)
        return shape(con)
    finally:
        con.close()


def shape_problems(con: sqlite3.Connection) -> list[str]:
    """What the database lacks of the current schema: a table, index or trigger, or
    a column (a damaged or hand-edited store); extra objects are not problems."""
    have = shape(con)
    problems = []
    for name, columns in expected_shape().items():
        if name not in have:
            problems.append(f"schema: {name} is missing")
        elif missing := [c for c in columns if c not in have[name]]:
            problems.append(f"schema: {name} lacks columns {missing}")
    return problems
