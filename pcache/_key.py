"""Cache keys: an ordered list of named parts, each hashed, combined into one digest.

Like JAX's own cache key, a key is a sequence of named parts so that a miss can be
explained part by part (``CacheKey.diff``/``describe``).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

__all__ = ["CacheKey"]

_KEY_DOMAIN = b"pcache-key-1\n"


@dataclass(frozen=True)
class CacheKey:
    """An ordered tuple of ``(name, hex digest of that part)``.

    ``persistent`` is False when some part identifies process-local objects (Python
    callback functions, by identity): such a key is valid for the memory tier only.
    """

    parts: tuple[tuple[str, str], ...]
    persistent: bool = True
    _digest: list = field(default_factory=list, init=False, repr=False, compare=False)

    @property
    def digest(self) -> str:
        """sha256 over the ordered (name, part-hash) pairs, hex."""
        if not self._digest:
            h = hashlib.sha256(_KEY_DOMAIN)
            for name, part in self.parts:
                # Length-prefix the name so ("ab","c") and ("a","bc") differ.
                nb = name.encode()
                h.update(len(nb).to_bytes(4, "little") + nb + bytes.fromhex(part))
            self._digest.append(h.hexdigest())
        return self._digest[0]

    def describe(self) -> str:
        """One line per part: name and hash (debug view)."""
        width = max((len(n) for n, _ in self.parts), default=0)
        lines = [f"{n:<{width}}  {p}" for n, p in self.parts]
        lines.append(
            f"{'=> key':<{width}}  {self.digest}" + ("" if self.persistent else " (local)")
        )
        return "\n".join(lines)

    def diff(self, other: CacheKey) -> list[str]:
        """Names of parts that differ (present in one key only, or with other hashes)."""
        mine, theirs = dict(self.parts), dict(other.parts)
        names = [n for n, _ in self.parts] + [n for n, _ in other.parts if n not in mine]
        return [n for n in names if mine.get(n) != theirs.get(n)]
