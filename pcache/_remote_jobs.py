"""The remote tier's writer thread: what a program never waits for. No JAX here.

Writes of compiled entries, local copies of remote hits, uploads of local entries
the remote lacks, lease releases and TTL refreshes run in order on one daemon
thread, off the program's critical path, flushed at exit (`Jobs.flush`).
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable

from pcache._remote_wire import Report

#: Uploads of local entries the remote lacks (`Jobs.offer`).
UPLOAD_RATE = 20.0  # checks a second
UPLOAD_BURST = 64
UPLOAD_BACKLOG = 256  # never with this many writes pending


class Jobs:
    """One writer thread (started on the first job, again after a fork) and the
    upload rate limit."""

    def __init__(self, report: Report) -> None:
        self._report = report
        self._lock = threading.Lock()
        self._jobs: queue.Queue | None = None
        self._writer: threading.Thread | None = None
        self._offered: set[str] = set()  # digests offered for upload (`offer`)
        self._bucket = (float(UPLOAD_BURST), time.monotonic())

    def after_fork(self) -> None:
        self._lock = threading.Lock()
        self._jobs = None
        self._writer = None

    def offer(self, digest: str) -> bool:
        """Whether to check (and upload) a local entry the remote may lack: once
        per digest and process, at most `UPLOAD_RATE` a second (`UPLOAD_BURST` at
        once), never with a writer backlog."""
        now = time.monotonic()
        with self._lock:
            if digest in self._offered or len(self._offered) >= 1 << 16:
                return False
            jobs = self._jobs
            if jobs is not None and jobs.unfinished_tasks >= UPLOAD_BACKLOG:
                return False
            tokens, last = self._bucket
            tokens = min(float(UPLOAD_BURST), tokens + (now - last) * UPLOAD_RATE)
            if tokens < 1:
                self._bucket = (tokens, now)
                return False
            self._bucket = (tokens - 1, now)
            self._offered.add(digest)
        return True

    def submit(self, job: Callable[[], None]) -> None:
        """Run ``job`` on the writer thread (in order), or here if none can start."""
        with self._lock:
            if self._jobs is None:
                self._jobs = queue.Queue()
            jobs = self._jobs
            if self._writer is None or not self._writer.is_alive():
                t = threading.Thread(
                    target=self._write_loop, args=(jobs,), name="pcache-remote", daemon=True
                )
                try:
                    t.start()
                except RuntimeError:
                    t = None
                self._writer = t
            writer = self._writer
        if writer is None:
            job()
            return
        jobs.put(job)

    def stop(self) -> None:
        """Let the writer thread end after the jobs handed to it."""
        with self._lock:
            jobs, writer = self._jobs, self._writer
            self._jobs = self._writer = None
        if jobs is not None and writer is not None:
            jobs.put(None)

    def _write_loop(self, jobs: queue.Queue) -> None:
        while True:
            job = jobs.get()
            if job is None:
                jobs.task_done()
                return
            try:
                job()
            except BaseException as exc:  # a job reports its own failures; never die
                self._report("write", "remote writer", exc)
            finally:
                jobs.task_done()

    def flush(self, timeout: float) -> bool:
        """Wait (at most ``timeout`` s) for the jobs handed to the writer thread;
        False if some are still pending."""
        jobs, writer = self._jobs, self._writer
        if jobs is None or writer is None:
            return True
        deadline = time.monotonic() + timeout
        while jobs.unfinished_tasks:
            if time.monotonic() >= deadline or not writer.is_alive():
                return False
            time.sleep(0.01)
        return True
