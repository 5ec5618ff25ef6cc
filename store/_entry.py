"""Entry metadata and the result records of gc() and verify()."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["BadRow", "Entry", "GcResult", "META_KEYS", "VerifyResult"]

#: Keys accepted in ``Store.put(..., meta=...)``; anything else is a ValueError.
META_KEYS = (
    "backend",
    "device_kind",
    "jax_version",
    "jaxlib_version",
    "function_name",
    "compile_seconds",
    "extra",
)
_STR_KEYS = META_KEYS[:5]

#: Columns of ``entries`` that make an Entry, in Entry field order.
ENTRY_COLUMNS = (
    "key",
    "backend",
    "device_kind",
    "jax_version",
    "jaxlib_version",
    "function_name",
    "raw_size",
    "stored_size",
    "compile_seconds",
    "created",
    "last_used",
    "hits",
    "codec",
    "checksum",
    "extra",
)


_TEXT_COLUMNS = (0, 1, 2, 3, 4, 5, 12, 13, 14)
_COUNT_COLUMNS = (6, 7, 11)  # raw_size, stored_size, hits
_TIME_COLUMNS = (8, 9, 10)  # compile_seconds, created, last_used


class BadRow(ValueError):
    """A row of ``entries`` holds a value of the wrong type or range."""


def _kind(v: object) -> str:
    text = repr(v)
    return f"{type(v).__name__} {text[:40]}{'...' if len(text) > 40 else ''}"


@dataclass(frozen=True)
class Entry:
    """Metadata of one stored value (no value bytes).

    Times are unix seconds (floats).  ``last_used`` and ``hits`` are persisted
    lazily: a process's recent hits appear after its store flushes (every few
    seconds, at ``close()`` and at exit).
    """

    key: str
    backend: str
    device_kind: str
    jax_version: str
    jaxlib_version: str
    function_name: str
    raw_size: int
    stored_size: int
    compile_seconds: float
    created: float
    last_used: float
    hits: int
    codec: str
    checksum: str
    extra: dict[str, Any] = field(default_factory=dict, hash=False, compare=True)

    @classmethod
    def from_row(cls, row: tuple) -> Entry:
        """Build from a row selected as :data:`ENTRY_COLUMNS`, checking every value.

        SQLite keeps whatever a writer stored (a column's type is only an affinity),
        so a row edited by hand or damaged can hold text where a size belongs.
        Raises `BadRow` saying which column is wrong.
        """
        values = list(row)
        for i in _TEXT_COLUMNS:
            if not isinstance(values[i], str):
                raise BadRow(f"{ENTRY_COLUMNS[i]} is {_kind(values[i])}, not text")
        for i in _COUNT_COLUMNS:
            v = values[i]
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise BadRow(f"{ENTRY_COLUMNS[i]} is {_kind(v)}, not a count")
        for i in _TIME_COLUMNS:
            v = values[i]
            if (
                isinstance(v, bool)
                or not isinstance(v, (int, float))
                or not math.isfinite(v)
                or v < 0
            ):
                raise BadRow(f"{ENTRY_COLUMNS[i]} is {_kind(v)}, not a finite number >= 0")
            values[i] = float(v)
        try:
            extra = json.loads(values[14]) if values[14] else {}
        except ValueError:
            extra = None
        if not isinstance(extra, dict):
            raise BadRow("extra is not a JSON object")
        values[14] = extra
        return cls(*values)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict; its shape is ``schemas/entry.schema.json``."""
        d = asdict(self)
        d["extra"] = dict(self.extra)
        return d


def validate_meta(meta: Mapping[str, Any] | None) -> dict[str, Any]:
    """Check ``meta`` for put() and return it with defaults filled in.

    Raises ValueError for unknown keys, non-finite or negative compile_seconds,
    and ``extra`` that is not a JSON-able dict; TypeError for wrongly typed values.
    """
    meta = dict(meta or {})
    unknown = sorted(set(meta) - set(META_KEYS))
    if unknown:
        raise ValueError(f"unknown meta keys {unknown}; valid keys are {list(META_KEYS)}")
    out: dict[str, Any] = {}
    for k in _STR_KEYS:
        v = meta.get(k, "")
        if not isinstance(v, str):
            raise TypeError(f"meta[{k!r}] must be a str, got {type(v).__name__}")
        out[k] = v
    cs = meta.get("compile_seconds", 0.0)
    if isinstance(cs, bool) or not isinstance(cs, (int, float)):
        raise TypeError(f"meta['compile_seconds'] must be a number, got {type(cs).__name__}")
    cs = float(cs)
    if not math.isfinite(cs) or cs < 0:
        raise ValueError(f"meta['compile_seconds'] must be finite and >= 0, got {cs}")
    out["compile_seconds"] = cs
    extra = meta.get("extra", {})
    if extra is None:
        extra = {}
    if not isinstance(extra, Mapping):
        raise TypeError(f"meta['extra'] must be a dict, got {type(extra).__name__}")
    try:
        out["extra"] = json.dumps(dict(extra), sort_keys=True, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"meta['extra'] is not JSON-serializable: {exc}") from exc
    return out


@dataclass(frozen=True)
class GcResult:
    """What :meth:`Store.gc` removed (or would remove, with ``dry_run=True``).

    ``bytes_freed`` counts stored (compressed) bytes of removed entries;
    ``disk_bytes_before``/``disk_bytes_after`` measure the whole directory's
    database, WAL and side files.
    """

    removed: list[Entry]
    bytes_freed: int
    orphans_removed: int
    corrupt_removed: int
    dry_run: bool
    disk_bytes_before: int
    disk_bytes_after: int


@dataclass(frozen=True)
class VerifyResult:
    """Problems found by :meth:`Store.verify`; ``ok`` when there are none.

    ``integrity`` holds SQLite's integrity_check lines other than ``"ok"``;
    ``corrupt`` keys whose bytes fail their checksum or cannot be decoded;
    ``missing`` keys whose value (side file or inline row) is gone; ``orphans``
    side files no row references (relative to ``values/``); ``reasons`` what is
    wrong with each corrupt or missing key.  ``fixed`` counts entries and orphan
    files removed when ``fix=True``; ``replaced`` says the database failed its
    integrity check beyond repair and was moved aside for an empty one.
    """

    checked: int
    integrity: list[str]
    corrupt: list[str]
    missing: list[str]
    orphans: list[str]
    fixed: int
    reasons: dict[str, str] = field(default_factory=dict)
    replaced: bool = False

    @property
    def ok(self) -> bool:
        return not (self.integrity or self.corrupt or self.missing or self.orphans)
