"""pcache's exception types.

One root, `PcacheError`; each family also subclasses the builtin it is a case of
(as the store's errors do, and filelock's ``Timeout(TimeoutError)``), so callers
may catch either. The store (`pcache.store`) keeps its own root, `StoreError`: it
is a component of its own and imports nothing of pcache; `pcache.enable` never
lets one escape (a store that cannot be used is replaced by the memory tier).
"""

from __future__ import annotations


class PcacheError(Exception):
    """Root of pcache's own errors."""


class CacheDirError(PcacheError, OSError):
    """The cache directory (or its secret) cannot be created, read or trusted;
    `pcache.enable` raises it (the JAX plugin logs it and runs without pcache)."""


class CheckError(PcacheError, AssertionError):
    """``JAX_PCACHE_CHECK=1``: a memoized digest, verdict or key differs from the same
    thing computed from scratch (a pcache bug that could serve a wrong program)."""


class Uncacheable(PcacheError):
    """The computation cannot be cached safely; pcache compiles it normally.

    ``reason`` is a short, stable slug (``"unknown-param:my_prim.fn:Foo"``,
    ``"dynamic-shapes"``...) used to count bypasses by cause; the message says more.
    """

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


class CorruptEntryError(PcacheError, ValueError):
    """An entry's bytes do not match the checksum recorded when it was stored
    (damaged on disk); it is removed and the program compiled normally."""


class IntegrityError(PcacheError):
    """An entry failed its HMAC check: it was not written by a holder of this cache's
    secret (a forged or edited entry); it is never loaded, and is removed."""


class StaleEntryError(PcacheError, LookupError):
    """An entry written in another entry format (another pcache version): a miss."""
