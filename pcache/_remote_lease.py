"""The fleet-wide single-flight: one host compiles a program, the others wait for it.

No JAX here. Before compiling, a host takes the key's *lease* (``SET NX`` with an
expiry, renewed at a third of it while it compiles and writes); the others wait for
the entry (bounded) and load it, and a dead holder's lease expires so another host
takes over. A lease is a nonce signed with the fleet key, read bounded
(`TAG_BYTES`): one pcache did not write (another shape, no expiry, an expiry beyond
the lease setting) is void, taken over at once by a host that writes.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import threading
import time
from typing import TYPE_CHECKING

from pcache._remote_wire import (
    LEASE_SLACK_MS,
    LEASE_TOKEN_LEN,
    POLL,
    TAG_BYTES,
    VOID,
    VOID_SECONDS,
    Lease,
    _Down,
    _quote,
)

if TYPE_CHECKING:
    from pcache._remote import Remote


class Leases:
    """The leases one process takes on one remote (`Remote.claim`, `Remote.release`)."""

    def __init__(self, remote: Remote) -> None:
        self.r = remote
        self.held: dict[str, str] = {}  # lease key -> token, while this process holds it
        self._renewer: threading.Thread | None = None

    def after_fork(self) -> None:
        self.held = {}
        self._renewer = None

    def forget(self) -> None:
        """Stop renewing every lease (they expire): the breaker opened, or a test
        plays a dead holder."""
        with self.r.lock:
            self.held.clear()

    def _token(self, name: str) -> str:
        nonce = secrets.token_hex(8)
        return nonce + self._mac(name, nonce)

    def _mac(self, name: str, nonce: str) -> str:
        msg = b"pcache-lease\0" + name.encode() + b"\0" + nonce.encode()
        return hmac.new(self.r._key, msg, hashlib.sha256).hexdigest()[:32]

    def kind(self, name: str, value: bytes, length: int, pttl: int) -> str:
        """What the lease ``name`` is: ``none`` (no lease), ``void`` (its holder
        stores nothing), ``live`` (a holder of the fleet key is compiling),
        ``long`` (a holder's, with an expiry beyond this host's lease setting),
        or ``forged`` (not pcache's: another shape, no expiry, too long)."""
        if pttl == -2 or (length == 0 and pttl < 0):
            return "none"
        ms = max(1, int(self.r.config.lease * 1000))
        forged = "forged" if pttl == -1 or pttl > ms + LEASE_SLACK_MS else ""
        if value == VOID and length == len(VOID):
            return forged or "void"
        if length == LEASE_TOKEN_LEN and re.fullmatch(rb"[0-9a-f]{48}", value):
            nonce, mac = value[:16].decode(), value[16:].decode()
            if hmac.compare_digest(self._mac(name, nonce), mac):
                return "long" if forged else "live"
        return "forged"

    def claim(self, digest: str, wait: float | None = None, cls: str = "") -> Lease:
        """See `Remote.claim`."""
        r = self.r
        if not r.readable:
            return Lease("off", digest)
        wait = r.config.wait if wait is None else max(0.0, wait)
        name, head = r.key_name("l", digest, cls=cls), r.key_name("e", digest, cls=cls)
        token = self._token(name)
        with r.lock:  # the unusable head our lookup found is not "ready"
            stale = r.stale.pop(digest, None)
        ms = max(1, int(r.config.lease * 1000))
        start = time.monotonic()
        pause, took_over, waited = POLL[0], False, False
        client = r.client

        def look() -> list:
            pipe = client.pipeline(transaction=False)
            pipe.getrange(head, 0, TAG_BYTES - 1)
            pipe.getrange(name, 0, TAG_BYTES - 1)
            pipe.strlen(name)
            pipe.pttl(name)
            return pipe.execute()

        def lease(outcome: str, spent: float = 0.0, took: bool = False) -> Lease:
            if outcome == "held":
                self._hold(name, token)
                return Lease("held", digest, token, spent, took, name)
            return Lease(outcome, digest, waited=spent, name=name)

        try:
            while True:
                if r.writable and r.cmd(
                    "lease", lambda: client.set(name, token, nx=True, px=ms), True
                ):
                    return lease("held", time.monotonic() - start if waited else 0.0, took_over)
                while True:
                    if not r.readable:
                        return lease("off", time.monotonic() - start)
                    tag, value, length, pttl = r.cmd("lease", look, True)
                    spent = time.monotonic() - start if waited else 0.0
                    if tag and tag != stale:
                        return lease("ready", spent)
                    kind = self.kind(name, value, length, pttl)
                    if kind in ("void", "long"):
                        return lease("absent", spent)
                    if kind == "forged":
                        r.report(
                            "lease",
                            "remote lease forged",
                            ValueError(
                                f"{digest[:12]}: a lease pcache did not write "
                                f"({_quote(value)}, {length} bytes, expiry "
                                f"{'none' if pttl == -1 else f'{pttl} ms'}); ignored"
                            ),
                        )
                        if not r.writable:
                            return lease("absent", spent)
                        args = [value, length, token, ms]
                        if r.cmd("lease", lambda a=args: r.scripts.take(keys=[name], args=a)):
                            return lease("held", spent, waited)
                        continue  # it changed: look again
                    if kind == "none":  # released or expired without an entry
                        if not r.writable:
                            return lease("absent", spent)
                        took_over = waited
                        break
                    left = start + wait - time.monotonic()
                    if left <= 0:
                        return lease("timeout", time.monotonic() - start)
                    time.sleep(min(pause, left))
                    pause, waited = min(pause * 1.5, POLL[1]), True
        except _Down:
            return lease("off", time.monotonic() - start)

    def release(self, lease: Lease, stored: bool = False) -> None:
        """See `Remote.release`."""
        if not lease.held:
            return
        lease.outcome = "released"
        r = self.r
        with r.lock:
            if self.held.get(lease.name) == lease.token:
                del self.held[lease.name]
        if r.health.is_open():
            return  # it expires on its own
        ms = 0 if stored else max(1, int(min(r.config.lease, VOID_SECONDS) * 1000))
        name = lease.name
        try:
            r.cmd("lease", lambda: r.scripts.release(keys=[name], args=[lease.token, ms]))
        except _Down:
            pass

    def _hold(self, name: str, token: str) -> None:
        with self.r.lock:
            self.held[name] = token
            if self._renewer is None or not self._renewer.is_alive():
                t = threading.Thread(target=self._renew_loop, name="pcache-lease", daemon=True)
                try:
                    t.start()
                except RuntimeError:  # the lease expires on its own: others take over
                    return
                self._renewer = t

    def _renew_loop(self) -> None:
        r = self.r
        ms = max(1, int(r.config.lease * 1000))
        while True:
            time.sleep(r.config.lease / 3)
            with r.lock:
                held = list(self.held.items())
                if not held:
                    self._renewer = None
                    return
            for name, token in held:
                try:
                    r.cmd("lease", lambda n=name, t=token: r.scripts.renew(keys=[n], args=[t, ms]))
                except _Down:
                    break
