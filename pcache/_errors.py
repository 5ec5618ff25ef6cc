"""pcache's exception types."""

from __future__ import annotations


class PcacheError(Exception):
    """Root of pcache's own errors."""


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
