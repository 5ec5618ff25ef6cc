"""The store's exception types, and the one place sqlite3/OS errors are mapped to them.

One root (:class:`StoreError`); each family also subclasses the matching builtin, like
filelock's ``Timeout(TimeoutError)``, so callers may catch either.
"""

from __future__ import annotations

import errno
import sqlite3

__all__ = [
    "StoreCorruptError",
    "StoreCorruptionWarning",
    "StoreError",
    "StoreFullError",
    "StoreLockedError",
    "StorePermissionError",
    "StoreReadOnlyError",
    "StoreVersionError",
]


class StoreError(Exception):
    """Root of the store's errors."""


class StoreLockedError(StoreError, TimeoutError):
    """The database (or the store's file lock) stayed busy beyond the deadline."""


class StoreCorruptError(StoreError):
    """The database file is not a SQLite database, or has a corrupt page."""


class StoreVersionError(StoreError):
    """The database was written by a newer schema; it is refused and left untouched."""


class StoreFullError(StoreError, OSError):
    """The disk (or a file-size/page-count limit) is full."""


class StorePermissionError(StoreError, PermissionError):
    """The store's directory or database is not writable (or not readable)."""


class StoreReadOnlyError(StorePermissionError):
    """A write to a store that is open read-only (see ``Store.read_only``)."""


class StoreCorruptionWarning(UserWarning):
    """A stored value failed its checksum; it was treated as a miss and removed."""


# Primary SQLite result codes (the low byte of an extended code).
_SQLITE_PERM = 3
_SQLITE_BUSY = 5
_SQLITE_LOCKED = 6
_SQLITE_READONLY = 8
_SQLITE_IOERR = 10
_SQLITE_CORRUPT = 11
_SQLITE_FULL = 13
_SQLITE_CANTOPEN = 14
_SQLITE_NOTADB = 26

#: Result codes that mean the database file itself is damaged.
DAMAGE_CODES = frozenset({_SQLITE_CORRUPT, _SQLITE_NOTADB})

_FULL_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}
_PERMISSION_ERRNOS = {errno.EACCES, errno.EPERM, errno.EROFS}


def sqlite_code(exc: sqlite3.Error) -> int | None:
    """The primary result code of ``exc`` (Python >= 3.11), else a guess from its message."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF
    msg = str(exc).lower()
    for needle, guess in (
        ("locked", _SQLITE_BUSY),
        ("busy", _SQLITE_BUSY),
        ("readonly", _SQLITE_READONLY),
        ("read-only", _SQLITE_READONLY),
        ("disk is full", _SQLITE_FULL),
        ("malformed", _SQLITE_CORRUPT),
        ("not a database", _SQLITE_NOTADB),
        ("unable to open", _SQLITE_CANTOPEN),
        ("disk i/o", _SQLITE_IOERR),
    ):
        if needle in msg:
            return guess
    return None


def is_busy(exc: BaseException) -> bool:
    """True when ``exc`` is SQLite saying "busy/locked, try again"."""
    return isinstance(exc, sqlite3.OperationalError) and sqlite_code(exc) in (
        _SQLITE_BUSY,
        _SQLITE_LOCKED,
    )


def translate(exc: BaseException, where: str) -> StoreError:
    """Map a sqlite3 or OS error raised at ``where`` to the store's exception family.

    The caller raises the result ``from exc``.
    """
    if isinstance(exc, StoreError):
        return exc
    if isinstance(exc, sqlite3.Error):
        code = sqlite_code(exc)
        msg = f"{where}: {exc}"
        if code in (_SQLITE_BUSY, _SQLITE_LOCKED):
            return StoreLockedError(msg)
        if code in (_SQLITE_CORRUPT, _SQLITE_NOTADB):
            return StoreCorruptError(msg)
        if code == _SQLITE_FULL:
            return StoreFullError(errno.ENOSPC, msg)
        if code in (_SQLITE_READONLY, _SQLITE_PERM, _SQLITE_CANTOPEN):
            return StorePermissionError(errno.EACCES, msg)
        return StoreError(msg)
    if isinstance(exc, OSError):
        msg = f"{where}: {exc}"
        if exc.errno in _FULL_ERRNOS:
            return StoreFullError(exc.errno, msg)
        if exc.errno in _PERMISSION_ERRNOS or isinstance(exc, PermissionError):
            return StorePermissionError(exc.errno or errno.EACCES, msg)
        return StoreError(msg)
    return StoreError(f"{where}: {exc!r}")
