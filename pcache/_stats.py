"""In-process counters: what `pcache.stats()` returns, and where else each event goes."""

from __future__ import annotations

import collections
import threading
from typing import Any

_COUNTERS = (
    "memory_hits",
    "disk_hits",
    "misses",
    "compiles",
    "bypasses",
    "evictions",
    "errors",
    "bytes_read",
    "bytes_written",
    "seconds_saved",
    "lock_waits",
    "hlo_hits",
    "hlo_misses",
    "hlo_compiles",
    "preloaded",
    "preload_hits",
    "writes_skipped",
    "nonpersistent",
    "trace_hits",
    "trace_misses",
    "trace_persist_hits",
    "trace_persist_writes",
    "local_misses",
    "remote_hits",
    "remote_misses",
    "remote_bytes_read",
    "remote_bytes_written",
    "remote_writes",
    "remote_errors",
    "remote_lease_waits",
    "remote_takeovers",
    "remote_uploads",
    "remote_breaker_opens",
    "remote_recoveries",
    "remote_slow_skips",
)


#: The sinks of an event `pcache._cache.Runtime.count` records besides `stats()`:
#: ``monitor``, a `jax.monitoring` event ``/pcache/<name>`` ("event", or "duration":
#: seconds, and then not a counter of `stats()`); ``persist``, a counter of the
#: store (what `pcache stats` shows across processes), or the prefix of one named
#: by the event's reason.
SINKS: dict[str, tuple[str, str]] = {
    "memory_hits": ("event", ""),
    "disk_hits": ("event", ""),
    "misses": ("event", ""),
    "errors": ("event", ""),
    "load_time_sec": ("duration", ""),
    "preload_hits": ("event", "preload_hits"),
    "remote_hits": ("event", "remote_hits"),
    "bypasses": ("event", "bypass:"),
    "nonpersistent": ("event", "nonpersistent:"),
    "seconds_saved": ("", "seconds_saved"),
    **{
        name: ("", name)
        for name in (
            "remote_misses", "remote_bytes_read", "remote_writes", "remote_bytes_written",
            "remote_errors", "remote_uploads", "remote_breaker_opens", "remote_recoveries",
            "remote_slow_skips",
        )
    },
}  # fmt: skip


class Stats:
    """In-process counters; `snapshot()` is what `pcache.stats()` returns."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._c: dict[str, float] = dict.fromkeys(_COUNTERS, 0)
        self._bypass: collections.Counter[str] = collections.Counter()
        self._local: collections.Counter[str] = collections.Counter()
        self._errors: collections.Counter[str] = collections.Counter()
        self._trace: collections.Counter[str] = collections.Counter()
        self._persist: collections.Counter[str] = collections.Counter()
        self._unrecorded: collections.Counter[str] = collections.Counter()
        self._remote_miss: collections.Counter[str] = collections.Counter()
        self._reasons = {
            "bypasses": self._bypass,
            "nonpersistent": self._local,
            "errors": self._errors,
            "remote_misses": self._remote_miss,
            "trace_persist_misses": self._persist,
            "trace_unrecorded": self._unrecorded,
        }

    def count(self, name: str, n: float = 1, why: str = "") -> None:
        """``n`` more of counter ``name``; ``why``: its reason, for the counters
        counted by reason (bypasses, nonpersistent, errors, remote_misses)."""
        with self._lock:
            if name in self._c:
                self._c[name] += n
            reasons = self._reasons.get(name)
            if reasons is not None:
                reasons[why] += 1

    def trace_hit(self) -> None:
        with self._lock:
            self._c["trace_hits"] += 1

    def trace_miss(self, reason: str, max_reasons: int) -> None:
        """A jit call traced (trace reuse did not serve it), by reason."""
        with self._lock:
            self._c["trace_misses"] += 1
            if reason not in self._trace and len(self._trace) >= max_reasons:
                reason = "other"
            self._trace[reason] += 1

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            out: dict[str, Any] = dict(self._c)
            out["bypass_reasons"] = dict(self._bypass)
            out["nonpersistent_reasons"] = dict(self._local)
            out["error_causes"] = dict(self._errors)
            out["trace_miss_reasons"] = dict(self._trace)
            out["trace_persist_misses"] = dict(self._persist)
            out["trace_unrecorded"] = dict(self._unrecorded)
            out["remote_miss_reasons"] = dict(self._remote_miss)
        c = out
        out["tiers"] = {
            "memory": {"hits": c["memory_hits"]},
            "local": {
                "hits": c["disk_hits"],
                "misses": c["local_misses"],
                "bytes_read": c["bytes_read"],
                "bytes_written": c["bytes_written"],
                "errors": c["errors"] - c["remote_errors"],
            },
            "remote": {
                "hits": c["remote_hits"],
                "misses": c["remote_misses"],
                "bytes_read": c["remote_bytes_read"],
                "bytes_written": c["remote_bytes_written"],
                "errors": c["remote_errors"],
                "uploads": c["remote_uploads"],
                "breaker_opens": c["remote_breaker_opens"],
                "recoveries": c["remote_recoveries"],
                "slow_skips": c["remote_slow_skips"],
            },
        }
        return out

    def reset(self) -> None:
        with self._lock:
            self._c = dict.fromkeys(_COUNTERS, 0)
            self._bypass.clear()
            self._local.clear()
            self._errors.clear()
            self._trace.clear()
            self._remote_miss.clear()
