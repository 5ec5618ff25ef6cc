"""The memory tier: ready-to-run executables, bounded in bytes. No JAX here."""

from __future__ import annotations

import collections
import threading
from typing import Any


class MemoryTier:
    """An LRU of ready-to-run executables bounded by a byte count.

    An entry's size is its serialized length plus `ENTRY_OVERHEAD`: a loaded
    executable holds more than its serialized bytes (JIT-compiled code, runtime
    structures). Measured on CPU with jax 0.10.2: cycling 1,500 small programs
    grew RSS by ~125 KB per resident executable whose serialized size was ~6 KB.
    """

    ENTRY_OVERHEAD = 128 * 1024

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._d: collections.OrderedDict[str, tuple[Any, int]] = collections.OrderedDict()
        self.bytes = 0

    def get(self, key: str) -> Any | None:
        with self._lock:
            item = self._d.get(key)
            if item is None:
                return None
            self._d.move_to_end(key)
            return item[0]

    def put(self, key: str, value: Any, nbytes: int) -> int:
        """Insert; returns how many entries were evicted to stay within the bound."""
        nbytes += self.ENTRY_OVERHEAD
        if nbytes > self.max_bytes:
            return 0
        evicted = 0
        with self._lock:
            old = self._d.pop(key, None)
            if old is not None:
                self.bytes -= old[1]
            self._d[key] = (value, nbytes)
            self.bytes += nbytes
            while self.bytes > self.max_bytes and self._d:
                _, (_, n) = self._d.popitem(last=False)
                self.bytes -= n
                evicted += 1
        return evicted

    def clear(self) -> None:
        with self._lock:
            self._d.clear()
            self.bytes = 0

    def __len__(self) -> int:
        return len(self._d)
