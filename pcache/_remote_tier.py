"""The remote tier as the runtime walks it: the fleet's Redis behind the local store.

No JAX here. A local miss asks the remote (`Fleet.lookup`): a hit is verified (the
client, `pcache._remote`), loaded, and copied into the local store on the writer
thread. Before a compile the runtime takes the program's fleet-wide lease
(`Fleet.claim`) and looks once more; a compile is written to the remote on the
writer thread, then the lease is released (`Fleet.put`). A local hit the remote
lacks is uploaded (`Fleet.put` of a hit: rate-limited, once per entry). What the
client reports (a failing, slow, full or recovered server) is counted, logged once
per cause and written to the cache directory's state file for `pcache stats`.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
import time
from typing import TYPE_CHECKING, Any

from pcache._errors import CheckError
from pcache._host import host_class_of_meta
from pcache._local import META_KEYS, check_key_parts
from pcache._tiers import Compiled, Hit, Request

if TYPE_CHECKING:
    from pcache._cache import Runtime
    from pcache._remote import Lease, Remote, RemoteConfig

logger = logging.getLogger("pcache")

#: A compile after a remote miss of these kinds replaces the entry there.
_REPLACE = ("tampered", "incomplete", "unloadable")
#: What the client reports, by cause: the counter, the state recorded, the message.
_REPORTS = {
    "remote full": (
        "",
        "read-only",
        "pcache: the remote tier %s is full (%s: %s); reading from it only for the rest "
        "of this process",
    ),
    "remote unavailable": (
        "remote_breaker_opens",
        "open",
        "pcache: the remote tier %s failed (%s: %s); it is off until it answers again "
        "(retried after a pause that grows while it fails), the local cache keeps working",
    ),
    "remote slow": ("remote_slow_skips", "slow", "pcache: the remote tier %s is too slow to pay off (%s: %s)"),
    "remote lease forged": (
        "",
        "",
        "pcache: the remote tier %s holds keys pcache did not write (%s: %s); someone else "
        "writes this Redis",
    ),
}  # fmt: skip
_REPORTS["remote wrong type"] = _REPORTS["remote lease forged"]


class Fleet:
    """The remote tier of one runtime: its client (None while it is off) and what the
    runtime needs of it."""

    name = "remote"

    def __init__(self, rt: Runtime, config: RemoteConfig) -> None:
        self.rt = rt
        self.config = config
        self.off_reason = ""
        self.client: Remote | None = None
        self.client = self._connect(config)

    def _connect(self, config: RemoteConfig) -> Remote | None:
        """The client, or None: configured without a usable fleet key, URL or
        namespace (logged once, naming the variable; local caching goes on)."""
        from pcache import _remote

        try:
            key = _remote.read_fleet_key(config.secret_file)
            return _remote.Remote(config, key, report=self.report)
        except Exception as exc:  # a bad fleet key, URL or namespace: local caching goes on
            self.off_reason = str(exc)
            self.rt.count("errors", why="remote settings", remote_errors=1)
            logger.warning(
                "pcache: the remote tier %s is off (%s); caching locally only",
                _remote.redact(config.url),
                exc,
            )
            self._state_file("off", str(exc), _remote.redact(config.url))
            return None

    # -- state ----------------------------------------------------------------

    def stats(self) -> dict[str, Any]:
        """The remote tier's URL (no password), namespace and state."""
        rem = self.client
        if rem is None:
            from pcache._remote import redact

            return {"url": redact(self.config.url), "state": "off", "reason": self.off_reason}
        return {
            "url": rem.url,
            "namespace": rem.config.namespace,
            "prefix": rem.prefix,
            "key_id": rem.key_id,
            **rem.info(),  # state, reason, failures, retry_in, slow_for, round_trip_ms
        }

    def _state_file(self, state: str, reason: str, url: str = "") -> None:
        """Record a change of the remote tier's state in the cache directory, for
        `pcache stats` (the last change any process of this directory saw)."""
        from pcache._remote import STATE_FILE

        rem = self.client
        data = {
            "state": state,
            "reason": reason[:500],
            "url": url or (rem.url if rem is not None else ""),
            "pid": os.getpid(),
            "time": time.time(),
        }
        if rem is not None:
            data.update(rem.info())
            data["state"] = state
        path = self.rt.settings.path / STATE_FILE
        tmp = path.with_name(f".{STATE_FILE}.{os.getpid()}.{threading.get_ident()}")
        try:
            tmp.write_text(json.dumps(data))
            os.replace(tmp, path)
        except OSError as exc:  # a read-only directory: stats just do not show it
            logger.debug("pcache: %s: %s", path, exc)
            with contextlib.suppress(OSError):
                tmp.unlink()

    def report(self, what: str, cause: str, exc: BaseException | None) -> None:
        """What the client reports: a failed command (it is off, or read-only when
        full, from now on), a recovery, or a failed writer job. Counted and logged
        once per cause; never raised (it may come from the writer thread)."""
        rt, rem = self.rt, self.client
        if cause == "remote recovered":  # not an error: the breaker closed again
            rt.count("remote_recoveries")
            logger.info("pcache: the remote tier %s answers again (%s)", rem and rem.url, exc)
            self._state_file("on", f"recovered {exc}")
            return
        rt.count("errors", why=cause, remote_errors=1)
        if cause not in _REPORTS:
            rt.log_once(
                cause,
                exc or RuntimeError(what),
                "pcache: %s failed (%s: %s); the cache itself is unaffected",
            )
            return
        counter, state, message = _REPORTS[cause]
        if counter:
            rt.count(counter)
        if state == "open":
            self._state_file(state, rem.state_reason if rem else str(exc))
        elif state:
            self._state_file(state, f"full: {exc}" if state == "read-only" else str(exc))
        first = rt.first(f"{cause}:")
        (logger.warning if first else logger.debug)(
            message, rem.url if rem else "?", type(exc).__name__, exc
        )

    def _error(self, cause: str, exc: BaseException, background: bool = False) -> None:
        """A failure of pcache's own around the remote tier (not the server's)."""
        self.rt.count("remote_errors")
        (self.rt.background_error if background else self.rt.error)(cause, exc)

    # -- the tier -------------------------------------------------------------

    def lookup(self, req: Request, recheck: bool = False) -> Hit | None:
        return self.fetch(req, recheck)[0]

    def fetch(self, req: Request, recheck: bool = False) -> tuple[Hit | None, str]:
        """The remote tier's entry for ``req``, verified and loaded; or ``(None,
        why)`` (missing, incomplete, tampered, unloadable, off). ``recheck``: the
        lookup before already counted it missing."""
        rem, rt, digest = self.client, self.rt, req.digest
        if rem is None or not req.persistent or not rem.readable:
            return None, "off"
        t0 = time.perf_counter()
        try:
            got = rem.get(digest, req.host_class)
        except Exception as exc:
            self._error("remote read", exc)
            return None, "error"
        if got.raw is None:
            if not recheck:  # the second look of one miss is not counted again
                rt.count("remote_misses", why=got.miss)
                if got.miss == "missing" and rt.first("remote other keys"):
                    rem.submit(self._check_other_keys)  # off the critical path
            if got.miss == "tampered":
                self._report_entry("remote entry signature", got.detail, count=not recheck)
            return None, got.miss
        head = got.head
        try:
            check_key_parts(rt, req.key, head.extra)
            exe = req.load(got.raw, head.extra.get("replay"))
        except CheckError:
            raise
        except Exception as exc:
            self._error("remote load", exc)
            rem.note_unusable(digest, req.host_class)  # waiters wait for its replacement
            return None, "unloadable"
        load_s = time.perf_counter() - t0
        n = len(got.raw)
        try:
            compile_s = float(head.meta.get("compile_seconds") or 0.0)
        except (TypeError, ValueError):
            compile_s = 0.0
        rem.note_compile(compile_s)
        saved = max(0.0, compile_s - load_s)
        rt.count("remote_hits", remote_bytes_read=n, seconds_saved=saved)
        meta = {k: v for k, v in head.meta.items() if k in META_KEYS}
        meta["extra"] = dict(head.extra)
        # The local copy is written by the writer thread, off the critical path.
        return Hit(exe, n, got.raw, meta, defer=rem.submit), ""

    def put(self, req: Request, found: Hit | Compiled, lease: Lease | None = None, miss: str = ""):
        """A compile: written to the remote on the writer thread, then ``lease`` is
        released (other hosts wait for the entry, not for the release). A hit of a
        tier before this one: uploaded if the remote lacks it (`offer`)."""
        rem = self.client
        if rem is None:
            return False
        if isinstance(found, Hit):
            return self._offer(req)
        if not rem.writable:
            if lease is not None:
                rem.submit(lambda: self.release(lease))
            return False
        raw, meta = found.serialized, req.meta

        def job() -> None:
            n = None
            try:
                n = rem.put(req.digest, raw, meta, replace=miss in _REPLACE, cls=req.host_class)
                if n:
                    self.rt.count("remote_writes", remote_bytes_written=n)
            except Exception as exc:
                self._error("remote write", exc, background=True)
            finally:
                if lease is not None:
                    self.release(lease, stored=n is not None)

        rem.submit(job)
        return True

    def _offer(self, req: Request) -> bool:
        """A local hit: if the remote lacks the entry (a new or flushed remote, one
        that was down when it was compiled), upload it, on the writer thread (once
        per entry and process, rate-limited: `pcache._remote.Remote.offer`)."""
        rem, digest = self.client, req.digest
        if rem is None or self.rt.preloaded.forked or not rem.offer(digest):
            return False

        def job() -> None:
            if rem.exists(digest, req.host_class) is not False:
                return  # there, or the remote cannot tell now
            try:
                n = self.upload(digest, cls=req.host_class)
            except Exception as exc:
                self._error("remote upload", exc, background=True)
                return
            if n:
                self.rt.count("remote_uploads")

        rem.submit(job)
        return True

    def upload(self, digest: str, replace: bool = False, cls: str | None = None) -> int | None:
        """Write the local entry ``digest`` (verified with this directory's secret)
        to the remote, in the key space of its host class (``cls``, or what its
        metadata says): bytes sent, 0 if it was there, None if not written (no such
        local entry, one that fails its HMAC, a remote that cannot take it). Runs
        on the caller's thread (`pcache remote push`, the writer thread)."""
        rem = self.client
        if rem is None:
            return None
        got = self.rt.local.read_for_upload(digest)
        if got is None:
            return None
        raw, meta = got
        if cls is None:
            cls = host_class_of_meta(meta) or ""
        n = rem.put(digest, raw, meta, replace=replace, cls=cls)
        if n:
            self.rt.count("remote_writes", remote_bytes_written=n)
        return n

    # -- the fleet's single-flight ----------------------------------------------

    def claim(self, req: Request, wait: float | None = None) -> Lease | None:
        """The fleet-wide lease for ``req`` (`pcache._remote.Lease`), after waiting
        (at most ``wait`` seconds) for a live holder on another host; None without
        a remote."""
        rem = self.client
        if rem is None or not rem.readable:
            return None
        try:
            lease = rem.claim(req.digest, wait, req.host_class)
        except Exception as exc:
            self._error("remote lease", exc)
            return None
        if lease.waited:
            self.rt.count("remote_lease_waits")
        if lease.took_over:
            self.rt.count("remote_takeovers")
        if lease.outcome == "timeout":
            self._error(
                "remote lease",
                TimeoutError(
                    f"the host compiling {req.digest[:12]} has not stored it in "
                    f"{rem.config.wait:.0f} s; compiling it here too"
                ),
            )
        return lease

    def release(self, lease: Lease, stored: bool = False) -> None:
        """Release ``lease``; not ``stored``: waiters compile at once (no entry is
        coming from this host)."""
        try:
            self.client.release(lease, stored)
        except Exception as exc:
            self._error("remote lease", exc, background=True)

    def note_compile(self, seconds: float) -> None:
        if self.client is not None:
            self.client.note_compile(seconds)

    # -- reports --------------------------------------------------------------

    def _report_entry(self, cause: str, detail: str, count: bool = True) -> None:
        """A remote entry this host will not load: counted, logged once per cause."""
        if count:
            self.rt.count("errors", why=cause, remote_errors=1)
        text = (
            "pcache: a remote entry failed verification (%s): it was written without "
            "the fleet key or altered; not loaded, compiling here and replacing it"
        )
        (logger.warning if self.rt.first(f"{cause}:") else logger.debug)(text, detail)

    def _check_other_keys(self) -> None:
        """Once per process, at the first remote miss: say so if hosts with other
        fleet keys write this namespace (their entries are invisible here)."""
        rem = self.client
        try:
            others, bad = rem.other_keys()
        except Exception as exc:
            self._error("remote read", exc)
            return
        if bad:  # not written by pcache: shown quoted and cut (`_remote_wire._quote`)
            self.rt.count("errors", why="remote key ids")
            logger.warning(
                "pcache: the remote namespace %r holds key ids pcache never writes (%s); "
                "ignored. Someone else writes this Redis.",
                rem.config.namespace,
                ", ".join(bad),
            )
        if others:
            self.rt.count("errors", why="remote fleet key")
            logger.warning(
                "pcache: the remote namespace %r is also written by hosts with other fleet "
                "keys (key ids %s; this host's key: %s). Hosts share entries only with "
                "hosts that hold the same key: check JAX_PCACHE_REMOTE_SECRET_FILE if this "
                "host should share with them.",
                rem.config.namespace,
                ", ".join(others[:5]),
                rem.key_id,
            )

    # -- lifetime -------------------------------------------------------------

    def flush_at_exit(self) -> None:
        rem = self.client
        if rem is None:
            return
        bound = max(30.0, 10 * rem.config.timeout)
        if not rem.flush(bound):
            self.rt.background_error(
                "remote write at exit",
                TimeoutError(f"writes to {rem.url} still pending after {bound:.0f} s"),
            )

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
