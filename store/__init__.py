"""pcache's persistent tier: a multi-process SQLite + side-file store for compiled executables.

>>> from pcache.store import Store
>>> with Store("/tmp/cache", max_bytes=2**30) as s:          # doctest: +SKIP
...     s.put("key", b"bytes", meta={"backend": "cpu", "compile_seconds": 1.5})
...     s.get("key")
b'bytes'

See :class:`Store` for the API and ``schemas/store.sql`` for the on-disk format.
This package must never import jax.
"""

from ._entry import META_KEYS, Entry, GcResult, VerifyResult
from ._errors import (
    StoreCorruptError,
    StoreCorruptionWarning,
    StoreError,
    StoreFullError,
    StoreLockedError,
    StorePermissionError,
    StoreReadOnlyError,
    StoreVersionError,
)
from ._policy import POLICIES
from ._schema import SCHEMA_VERSION
from ._store import INLINE_THRESHOLD, MAX_VALUE_SIZE, Store, checksum_matches, policies

__all__ = [
    "INLINE_THRESHOLD",
    "MAX_VALUE_SIZE",
    "META_KEYS",
    "POLICIES",
    "SCHEMA_VERSION",
    "Entry",
    "GcResult",
    "Store",
    "StoreCorruptError",
    "StoreCorruptionWarning",
    "StoreError",
    "StoreFullError",
    "StoreLockedError",
    "StorePermissionError",
    "StoreReadOnlyError",
    "StoreVersionError",
    "VerifyResult",
    "checksum_matches",
    "policies",
]
