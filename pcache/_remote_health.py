"""The remote tier's health: a circuit breaker and a latency check. No JAX here.

A remote that fails (down, slow past the timeout, refusing commands) is switched off
with one report: *open* for `BREAKER_OPEN` seconds (doubling while it keeps failing),
then *half-open* (the next command is a probe: success closes it, sharing resumes).
One that answers but costs more than it saves (`LOOKUP_ROUND_TRIPS` round trips
against a compile here) is skipped for `SLOW_SKIP`. One that is full (out of memory)
is only read from, for the rest of the process.
"""

from __future__ import annotations

import collections
import threading
import time
from typing import Any

from pcache._remote_wire import RemoteConfig, Report, _short

#: The circuit breaker: open this long after a failure, twice as long after each
#: further failure in a row, at most the second.
BREAKER_OPEN = (2.0, 120.0)
#: Latency: the remote is skipped when ``LOOKUP_ROUND_TRIPS`` round trips (the
#: fastest of the last ``RTT_SAMPLES``) cost more than a compile here (what a hit
#: saves; `DEFAULT_SAVING` until one is seen, never under `MIN_SAVING`), for
#: `SLOW_SKIP` (doubling each time, up to the second), then measured again.
LOOKUP_ROUND_TRIPS = 3
RTT_SAMPLES = 3
DEFAULT_SAVING = 0.25
MIN_SAVING = 0.01
SLOW_SKIP = (30.0, 600.0)


class Health:
    """Whether the remote may be read and written now, and why not."""

    def __init__(self, config: RemoteConfig, report: Report) -> None:
        self.config = config
        self._report = report
        self.full = False  # out of memory: read from only, for the rest of the process
        self.reason = "JAX_PCACHE_REMOTE_READ_ONLY" if config.read_only else ""
        self.lock = threading.Lock()
        # The circuit breaker: closed (``open_until`` 0); open until ``open_until``
        # after ``failures`` failures in a row; half-open once that time has passed
        # (the next command is the probe: success closes it, failure opens it longer).
        self.failures = 0
        self.open_until = 0.0
        # Latency: round trips of the commands a lookup waits for (the last few),
        # against what a hit saves (compile seconds seen here); too slow: skipped
        # until ``slow_until``.
        self._rtts: collections.deque[float] = collections.deque(maxlen=RTT_SAMPLES)
        self._compile_s: float | None = None
        self.slow_until = 0.0
        self._slow_times = 0

    @property
    def state(self) -> str:
        """on, read-only (configured, or the server is full), open (failing: off
        until a retry), half-open (the next command is the retry), slow (skipped:
        its latency exceeds what it saves)."""
        now = time.monotonic()
        if self.open_until:
            return "open" if now < self.open_until else "half-open"
        if now < self.slow_until:
            return "slow"
        return "read-only" if self.config.read_only or self.full else "on"

    @property
    def readable(self) -> bool:
        return self.state in ("on", "read-only", "half-open")

    @property
    def writable(self) -> bool:
        return self.state in ("on", "half-open") and not (self.config.read_only or self.full)

    def is_open(self) -> bool:
        return bool(self.open_until) and time.monotonic() < self.open_until

    def info(self) -> dict[str, Any]:
        """The breaker and latency state, for stats."""
        now = time.monotonic()
        with self.lock:
            rtt = min(self._rtts) if self._rtts else None
            return {
                "state": self.state,
                "reason": self.reason,
                "failures": self.failures,
                "retry_in": max(0.0, self.open_until - now) if self.open_until else None,
                "slow_for": max(0.0, self.slow_until - now) if now < self.slow_until else None,
                "round_trip_ms": None if rtt is None else rtt * 1000,
            }

    def fail(self, what: str, exc: BaseException, full: bool) -> None:
        """A command failed: the breaker opens (for longer after each failure in a
        row; only read from, for the rest of the process, if the server is ``full``)."""
        with self.lock:
            if full:
                self.full = True
                self.reason = f"full: {_short(exc)}"
            else:
                self.failures += 1
                wait = min(BREAKER_OPEN[0] * 2 ** (self.failures - 1), BREAKER_OPEN[1])
                self.open_until = time.monotonic() + wait
                self.reason = (
                    f"{what}: {type(exc).__name__}: {_short(exc)} (retrying in {wait:.0f} s)"
                )
        self._report(what, "remote full" if full else "remote unavailable", exc)

    def ok(self) -> None:
        """A command succeeded: a half-open breaker closes."""
        if not self.open_until:
            return
        with self.lock:
            if not self.open_until:
                return
            failures, self.failures, self.open_until = self.failures, 0, 0.0
            self.reason = ""
        self._report("probe", "remote recovered", RuntimeError(f"after {failures} failures"))

    def note_compile(self, seconds: float) -> None:
        """A compile this host did or was spared (what a hit saves)."""
        with self.lock:
            if seconds > 0:
                c = self._compile_s
                self._compile_s = seconds if c is None else 0.8 * c + 0.2 * seconds

    def sample(self, seconds: float) -> None:
        """A round trip a lookup waited for."""
        with self.lock:
            self._rtts.append(seconds)
            if len(self._rtts) < RTT_SAMPLES:
                return
            rtt = min(self._rtts)  # the floor: a loaded host's hiccups are not latency
            saves = max(self._compile_s or DEFAULT_SAVING, MIN_SAVING)
            if rtt * LOOKUP_ROUND_TRIPS <= saves:
                return
            self._slow_times += 1
            wait = min(SLOW_SKIP[0] * 2 ** (self._slow_times - 1), SLOW_SKIP[1])
            self.slow_until = time.monotonic() + wait
            self._rtts.clear()  # measured afresh when the skip ends
            why = (
                f"round trips of {rtt * 1000:.0f} ms, {LOOKUP_ROUND_TRIPS} per lookup, cost more "
                f"than a hit saves (compiles of {saves * 1000:.0f} ms); skipped for {wait:.0f} s"
            )
            self.reason = f"slow: {why}"
        self._report("latency", "remote slow", TimeoutError(why))

    def after_fork(self) -> None:
        self.lock = threading.Lock()
