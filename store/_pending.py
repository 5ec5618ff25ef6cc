"""Coalesced bookkeeping: hits, ``last_used`` times and counters buffered in memory.

A get costs no write: what it would record waits here until a threshold or an
interval passes, or another write carries it (piggybacked, in that write's
transaction), or the store closes.  A failed write puts what it took back.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Mapping

__all__ = ["Pending", "add_counters", "apply_pending"]


class Pending:
    """This process's not-yet-written updates; safe to share between threads."""

    def __init__(self, *, threshold: int, interval: float) -> None:
        self.threshold = threshold
        self.interval = interval
        self.lock = threading.Lock()
        self.hits: dict[str, list[float]] = {}  # key -> [hits, last_used]
        self.counters: dict[str, float] = {}
        self.n = 0
        self.last_flush = time.monotonic()

    def note_hit(self, key: str) -> None:
        now = time.time()
        with self.lock:
            h = self.hits.get(key)
            if h is None:
                self.hits[key] = [1, now]
            else:
                h[0] += 1
                h[1] = now
            self.counters["hits"] = self.counters.get("hits", 0) + 1
            self.n += 1

    def note_counters(self, counters: Mapping[str, float]) -> None:
        with self.lock:
            for name, value in counters.items():
                self.counters[name] = self.counters.get(name, 0) + value
            self.n += 1

    def take(self) -> tuple[dict, dict] | None:
        """Everything buffered, emptied here; None when nothing is."""
        with self.lock:
            if not self.n:
                return None
            hits, counters = self.hits, self.counters
            self.hits, self.counters, self.n = {}, {}, 0
            self.last_flush = time.monotonic()
        return hits, counters

    def restore(self, hits: dict, counters: dict) -> None:
        """Put back what :meth:`take` returned (its write failed)."""
        with self.lock:
            for key, (n, t) in hits.items():
                h = self.hits.setdefault(key, [0, t])
                h[0] += n
                h[1] = max(h[1], t)
            for name, v in counters.items():
                self.counters[name] = self.counters.get(name, 0) + v
            self.n += max(1, len(hits))

    def drop(self) -> None:
        with self.lock:
            self.hits, self.counters, self.n = {}, {}, 0

    def due(self) -> bool:
        """Whether enough is buffered, or for long enough, to write it now."""
        return self.n >= self.threshold or bool(
            self.n and time.monotonic() - self.last_flush >= self.interval
        )

    def counter_snapshot(self) -> dict[str, float]:
        with self.lock:
            return dict(self.counters)


def add_counters(con: sqlite3.Connection, counters: Mapping[str, float]) -> None:
    con.executemany(
        "INSERT INTO counters (name, value) VALUES (?, ?) "
        "ON CONFLICT (name) DO UPDATE SET value = value + excluded.value",
        [(k, v) for k, v in counters.items() if v],
    )


def apply_pending(con: sqlite3.Connection, hits: dict, counters: dict) -> None:
    con.executemany(
        "UPDATE entries SET hits = hits + ?, last_used = max(last_used, ?) WHERE key = ?",
        [(int(n), t, key) for key, (n, t) in hits.items()],
    )
    add_counters(con, counters)
