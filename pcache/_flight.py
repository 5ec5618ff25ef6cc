"""Single-flight across processes: one compile per key; the others wait and load it.

No JAX here. One lock file per key under ``<cache>/locks/`` (filelock: the OS
releases a lock whose holder dies, so a killed compiler never blocks anyone). A
holder removes its lock file once the entry is stored; whoever takes a lock reads
the store before compiling.

A holder that is alive but stopped (SIGSTOP, a debugger, a frozen container) would
make every waiter wait the whole lock timeout. So while it holds locks, a process
touches a *beat* file beside each one (``<key>.beat``) every `BEAT` seconds, from a
daemon thread. A waiter that sees the lock held and the beat file unchanged for
``stale`` seconds of its own clock (so clock skew on a shared filesystem does not
matter) stops waiting and compiles itself, as it does after ``timeout``.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import filelock

BEAT = 2.0  # seconds between a holder's heartbeats
POLL = 0.5  # seconds between a waiter's looks at the beat
DEFAULT_STALE = 30.0


@dataclass
class Ticket:
    """The outcome of `Flight.claim`: ``held`` (ours to compile under), else why
    not: ``"timeout"``, ``"stale"`` (the holder stopped beating) or ``"error"``."""

    held: bool
    outcome: str
    waited: bool
    error: BaseException | None = None
    _lock: filelock.BaseFileLock | None = None
    _flight: Flight | None = None
    _digest: str = ""

    def done(self) -> None:
        """The entry is stored: remove the lock file (safe while held: whoever takes
        any lock for this key from now on reads the store first)."""
        if self.held and self._lock is not None:
            with contextlib.suppress(OSError):
                os.unlink(self._lock.lock_file)

    def release(self) -> None:
        if self.held and self._flight is not None:
            self._flight._stop_beat(self._digest)
            self._lock.release()
            self.held = False


class Flight:
    def __init__(self, locks_dir: Path, *, timeout: float, stale: float = DEFAULT_STALE) -> None:
        self.locks_dir = locks_dir
        self.timeout = timeout
        self.stale = stale
        self._beating: dict[str, Path] = {}
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def after_fork(self) -> None:
        """In a forked child: the parent's beats and beat thread are not ours."""
        self._beating = {}
        self._lock = threading.Lock()
        self._thread = None

    def claim(self, digest: str) -> Ticket:
        """Take the lock for ``digest``, waiting while a live holder compiles it."""
        lock = filelock.FileLock(str(self.locks_dir / f"{digest}.lock"), is_singleton=False)
        try:
            lock.acquire(timeout=0)
            return self._held(lock, digest, waited=False)
        except filelock.Timeout:
            pass
        except OSError as exc:
            return Ticket(False, "error", False, exc)
        beat = self.locks_dir / f"{digest}.beat"
        start = last_change = time.monotonic()
        seen = _mtime(beat)
        while True:
            now = time.monotonic()
            left = start + self.timeout - now
            if left <= 0:
                return Ticket(False, "timeout", True)
            try:
                lock.acquire(timeout=min(POLL, left))
                return self._held(lock, digest, waited=True)
            except filelock.Timeout:
                pass
            except OSError as exc:
                return Ticket(False, "error", True, exc)
            m = _mtime(beat)
            if m != seen:
                seen, last_change = m, time.monotonic()
            elif time.monotonic() - last_change >= self.stale:
                return Ticket(False, "stale", True)

    def _held(self, lock: filelock.BaseFileLock, digest: str, *, waited: bool) -> Ticket:
        self._start_beat(digest)
        return Ticket(True, "held", waited, None, lock, self, digest)

    # -- heartbeat ----------------------------------------------------------------

    def _start_beat(self, digest: str) -> None:
        path = self.locks_dir / f"{digest}.beat"
        with contextlib.suppress(OSError):
            path.write_bytes(f"{os.getpid()}\n".encode())
        with self._lock:
            self._beating[digest] = path
            if self._thread is None or not self._thread.is_alive():
                t = threading.Thread(target=self._beat_loop, name="pcache-heartbeat", daemon=True)
                try:
                    t.start()
                except RuntimeError:  # can't start new thread: waiters fall back on timeout
                    return
                self._thread = t

    def _stop_beat(self, digest: str) -> None:
        with self._lock:
            path = self._beating.pop(digest, None)
        if path is not None:
            with contextlib.suppress(OSError):
                os.unlink(path)

    def _beat_loop(self) -> None:
        while True:
            time.sleep(BEAT)
            with self._lock:
                paths = list(self._beating.values())
                if not paths:
                    self._thread = None
                    return
            for path in paths:
                with contextlib.suppress(OSError):
                    os.utime(path)


def _mtime(path: Path) -> float | None:
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return None


def sweep_locks(locks_dir: Path, *, older_than: float = 3600.0, dry_run: bool = False) -> int:
    """Remove single-flight lock files nobody holds, older than ``older_than`` seconds.

    A lock file is removed as soon as its entry is stored; one whose compile failed
    (or was killed) stays behind. A file is only unlinked while this process holds
    its lock, so a live compiler is never disturbed; a waiter that opened the old
    file re-reads the store before compiling, as after any release.
    """
    locks_dir = Path(locks_dir)
    if not locks_dir.is_dir():
        return 0
    cutoff = time.time() - older_than
    removed = 0
    for beat in locks_dir.glob("*.beat"):  # a killed holder's: its lock is free
        lock = filelock.FileLock(str(beat.with_suffix(".lock")), is_singleton=False)
        try:
            if beat.stat().st_mtime > cutoff:
                continue
            lock.acquire(timeout=0)
        except (filelock.Timeout, OSError):
            continue
        try:
            if not dry_run:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(beat)
        finally:
            lock.release()
    for path in locks_dir.glob("*.lock"):
        try:
            if path.stat().st_mtime > cutoff:
                continue
        except FileNotFoundError:  # removed by its compiler meanwhile
            continue
        lock = filelock.FileLock(str(path), is_singleton=False)
        try:
            lock.acquire(timeout=0)
        except filelock.Timeout:  # held: a compile is in progress
            continue
        try:
            if not dry_run:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)
            removed += 1
        finally:
            lock.release()
    return removed
