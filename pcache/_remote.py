"""The remote tier's client: executables shared by a fleet of hosts through Redis (or Valkey).

No JAX here (``pcache remote`` uses it). It sits behind the local store: a local
miss asks the remote; a remote hit is verified, loaded and copied into the local
store; a compile is stored locally, then written to the remote by a writer thread
(`pcache._remote_jobs`, off the program's critical path, flushed at exit). One host
compiles a program for the whole fleet (`pcache._remote_lease`). What the runtime
does with it is `pcache._remote_tier`; the format on the server is
`pcache._remote_wire`; its health (circuit breaker, latency) `pcache._remote_health`;
what `pcache remote stats|gc` do `pcache._remote_admin`.

Trust: the head is signed (HMAC-SHA256) with the fleet key (a file only its owner
may read, `JAX_PCACHE_REMOTE_SECRET_FILE`), over the head's Redis key name and
its JSON, which holds the sha256 and size of the compressed value: a head that
does not verify is never read further, a value that does not match its head is
never inflated. Nothing is unpickled. A head names the id of the key that signed it, so a
host with another fleet key says so (once) instead of calling the fleet's
entries forged, and never overwrites them.

Host class: entries live in the key space of their executable's class
(`pcache._host`): a CPU executable is shared only with hosts whose CPUs have the
same features, an accelerator's with hosts of the same device kind and runtime.

Hostile input: nothing is read unbounded. An entry key is read at most
`MAX_HEAD_BYTES` and `INLINE_BYTES` (a value stored with its head) long; a larger
value's chunks are read only once the server (a script) has checked that they are
no longer than the signed head says; a lease at most `TAG_BYTES`; the key-ids set
`KEY_IDS_READ` members cut server-side.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import hmac
import json
import os
import re
import secrets
import socket
import threading
import time
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import zstandard

from pcache import _memos
from pcache._host import cpu_class
from pcache._remote_admin import gc, inventory
from pcache._remote_health import Health
from pcache._remote_jobs import Jobs
from pcache._remote_lease import Leases
from pcache._remote_wire import (
    _CHUNKS,
    _KEY_IDS,
    _LOCAL_ONLY,
    _RELEASE,
    _RENEW,
    _TAKE,
    CHUNK_BATCH,
    DEFAULT_LEASE,
    DEFAULT_TIMEOUT,
    INLINE_BYTES,
    KEY_IDS_READ,
    LEASE_TOKEN_LEN,
    MAX_HEAD_BYTES,
    MAX_KEY_ID_BYTES,
    NAMESPACE_RE,
    REMOTE_FORMAT,
    STATE_FILE,
    TAG_BYTES,
    Fetched,
    Head,
    Lease,
    RemoteConfig,
    RemoteError,
    Report,
    _Down,
    _quote,
    _sha,
    _short,
    connect,
    key_id,
    prefix_root,
    read_fleet_key,
    redact,
    split_entry,
)

_ENTRY_READ = MAX_HEAD_BYTES + 1 + INLINE_BYTES  # at most this much of an entry key
_HEAD_FIELDS = tuple(f.name for f in dataclasses.fields(Head))
_WRITER_ID = re.compile(r"[0-9a-f]{1,64}")

__all__ = [
    "DEFAULT_LEASE",
    "DEFAULT_TIMEOUT",
    "LEASE_TOKEN_LEN",
    "REMOTE_FORMAT",
    "STATE_FILE",
    "Fetched",
    "Head",
    "Lease",
    "Remote",
    "RemoteConfig",
    "RemoteError",
    "connect",
    "gc",
    "inventory",
    "key_id",
    "prefix_root",
    "read_fleet_key",
    "redact",
]


class Remote:
    """One process's connection to the fleet's remote tier."""

    def __init__(self, config: RemoteConfig, key: bytes, report: Report | None = None) -> None:
        try:
            import redis  # the remote tier's only dependency, imported when it is used
        except ImportError as exc:
            raise ImportError(
                "pcache's remote tier needs the redis package: pip install 'jax-pcache[remote]'"
            ) from exc

        self.config = config
        self.url = redact(config.url)
        self._key = key
        self._head_mac = hmac.new(key, b"pcache-remote-head\0", hashlib.sha256)
        self.key_id = key_id(key)
        self.host_class = cpu_class()  # this host's: the key space of its CPU programs
        ns = config.namespace
        if not NAMESPACE_RE.match(ns):
            raise RemoteError(
                f"remote namespace {ns[:80]!r}: use 1-64 of A-Z a-z 0-9 . _ - "
                "(JAX_PCACHE_REMOTE_NAMESPACE)"
            )
        # Each fleet key has its own key space: hosts with different keys never read,
        # wait for or overwrite each other's entries (`other_keys` tells them apart).
        self.prefix = self.prefix_of("")
        self._key_ids = f"{prefix_root(ns)}key-ids"
        self._announced = False
        self.stale: dict[str, bytes] = {}  # digest -> tag of a head found unusable
        self.report: Report = report or (lambda what, cause, exc: None)
        self._redis_errors = (redis.RedisError, OSError)
        self._oom = getattr(redis.exceptions, "OutOfMemoryError", ())
        self._response_error = redis.exceptions.ResponseError
        self._noscript = redis.exceptions.NoScriptError
        self.client = connect(config.url, config.timeout)
        self.lock = threading.Lock()
        self.health = Health(config, self.report)
        self.leases = Leases(self)
        self.jobs = Jobs(self.report)
        self._cctx = zstandard.ZstdCompressor(level=3, write_content_size=True)
        self._dctxs = threading.local()  # a decompressor per thread (not thread-safe)
        self.writer_name = f"{socket.gethostname()}:{os.getpid()}"
        reg = self.client.register_script
        self.scripts = SimpleNamespace(
            release=reg(_RELEASE), renew=reg(_RENEW), take=reg(_TAKE), chunks=reg(_CHUNKS),
            ids=reg(_KEY_IDS),
        )  # fmt: skip
        _memos.reset_after_fork(self)  # (weakly: a closed tier is not kept alive)

    def prefix_of(self, cls: str) -> str:
        """The key space of host class ``cls`` ("": this host's CPU class) and this
        fleet key."""
        return f"{prefix_root(self.config.namespace)}{cls or self.host_class}.{self.key_id}:"

    def key_name(self, kind: str, digest: str, *rest: object, cls: str = "") -> str:
        prefix = self.prefix if not cls else self.prefix_of(cls)
        return ":".join((f"{prefix}{kind}", digest, *map(str, rest)))

    # -- state ------------------------------------------------------------------------

    state = property(lambda self: self.health.state, doc="`Health.state`")
    readable = property(lambda self: self.health.readable)
    writable = property(lambda self: self.health.writable)
    state_reason = property(lambda self: self.health.reason)

    def info(self) -> dict[str, Any]:
        """The breaker and latency state, for stats."""
        return self.health.info()

    def note_compile(self, seconds: float) -> None:
        self.health.note_compile(seconds)

    def cmd(self, what: str, fn: Callable[[], Any], timed: bool = False) -> Any:
        """Run one command (or pipeline, or script): the breaker learns of its
        outcome; ``timed``: a round trip a lookup waits for (latency check).
        Raises `_Down` (reported) when it fails."""
        t0 = time.monotonic()
        try:
            out = fn()
        except self._redis_errors as exc:
            if isinstance(exc, self._response_error) and "WRONGTYPE" in str(exc):
                # A key pcache never writes so (a list where a string belongs): bad
                # data, not a failing server. This operation is given up.
                self.report(what, "remote wrong type", ValueError(_short(exc)))
                raise _Down from exc
            full = isinstance(exc, self._oom) or (
                isinstance(exc, self._response_error) and str(exc).startswith("OOM")
            )
            self.health.fail(what, exc, full)
            self.leases.forget()
            raise _Down from exc
        if timed:
            self.health.sample(time.monotonic() - t0)
        self.health.ok()
        return out

    def _dctx(self) -> zstandard.ZstdDecompressor:
        d = getattr(self._dctxs, "d", None)
        if d is None:
            d = self._dctxs.d = zstandard.ZstdDecompressor()
        return d

    def _after_fork(self) -> None:
        self.lock = threading.Lock()
        self.health.after_fork()
        self.leases.after_fork()
        self.jobs.after_fork()
        # redis-py's pool notices the new pid and opens new connections.

    # -- single-flight (`pcache._remote_lease`) and the writer thread (`_remote_jobs`) --

    def claim(self, digest: str, wait: float | None = None, cls: str = "") -> Lease:
        """Take the lease for ``digest``, or wait (at most ``wait`` seconds, default
        ``config.wait``) for the host that holds it: until it stores an entry
        (``ready``), says it will store none (``absent``: compile here, no lease),
        or its lease ends without one (we take over). A host that may not write
        takes no lease, but waits the same way. A lease pcache did not write is
        void: a writer takes it over at once, a reader compiles without it."""
        return self.leases.claim(digest, wait, cls)

    def release(self, lease: Lease, stored: bool = False) -> None:
        """Give ``lease`` up. Not ``stored``: nothing is coming from this host (a
        compile error, a program that cannot be serialized): the lease is left as
        void for a little while, so the hosts waiting for it compile at once, side
        by side, instead of taking it over one after another."""
        self.leases.release(lease, stored)

    def offer(self, digest: str) -> bool:
        """Whether to check (and upload) a local entry the remote may lack
        (`Jobs.offer`: once per digest, rate-limited)."""
        return self.writable and self.jobs.offer(digest)

    def submit(self, job: Callable[[], None]) -> None:
        """Run ``job`` on the writer thread (in order), or here if none can start."""
        self.jobs.submit(job)

    def flush(self, timeout: float) -> bool:
        """Wait (at most ``timeout`` s) for the writes handed to the writer thread;
        False if some are still pending."""
        return self.jobs.flush(timeout)

    def close(self) -> None:
        """Stop the writer thread (after `flush`) and close the connections."""
        self.jobs.stop()
        with contextlib.suppress(Exception):
            self.client.close()

    def ping(self) -> float:
        """Seconds for one round trip; raises the client's error."""
        t0 = time.perf_counter()
        self.client.ping()
        return time.perf_counter() - t0

    # -- reading ----------------------------------------------------------------------

    def get(self, digest: str, cls: str = "") -> Fetched:
        """The entry ``digest``, verified, or why not (never raises). Nothing is read
        unbounded: the entry key at most its head's and an inline value's bounds, a
        larger value's chunks only if together they are exactly the size the signed
        head gives. ``cls``: the host class of its executable ("": this host's CPU)."""
        if not self.readable:
            return Fetched(None, miss="off")
        name = self.key_name("e", digest, cls=cls)
        try:  # one round trip, one plain read: the head, and the value if it is inline
            blob = self.cmd("read", lambda: self.client.getrange(name, 0, _ENTRY_READ - 1), True)
        except _Down:
            return Fetched(None, miss="off")
        if not isinstance(blob, bytes) or not blob:
            return Fetched(None, miss="missing")
        tag, text, inline = split_entry(blob)
        head, why = self._verify_head(name, digest, tag, text)
        if head is None:
            self._note_stale(digest, blob)
            return Fetched(None, miss=why[0], detail=why[1])
        keys = [f"{self.key_name('c', digest, cls=cls)}:{head.id}:{i}" for i in range(head.chunks)]
        if head.chunks:  # a large value: read now, bounded by its signed size
            if inline:
                got: list[bytes] | int = -2
            else:
                try:
                    got = self._read_chunks(keys, head.packed_size)
                except _Down:
                    return Fetched(None, miss="off")
            if isinstance(got, int):  # a chunk missing, or too long
                self._note_stale(digest, blob)
                if got == -1:
                    return Fetched(
                        None, miss="incomplete", detail=f"{digest[:12]}: a chunk is gone"
                    )
                return Fetched(
                    None,
                    miss="tampered",
                    detail=f"{digest[:12]}: its chunks are not the length its head says",
                )
            packed = b"".join(got)
        else:
            packed = inline
        if self.config.ttl and self.writable:  # off the critical path
            self.submit(lambda: self._touch(name, keys))
        # Every byte is checked against the length and sha256 the signed head gives,
        # before it is inflated (to exactly the signed size).
        raw = None
        if len(packed) == head.packed_size and _sha(packed) == head.packed_sha256:
            with contextlib.suppress(Exception):  # (a fleet-key holder's bad frame)
                if zstandard.get_frame_parameters(packed).content_size == head.raw_size:
                    raw = self._dctx().decompress(packed, max_output_size=head.raw_size)
        if raw is None or len(raw) != head.raw_size:
            self._note_stale(digest, blob)
            return Fetched(
                None, miss="tampered", detail=f"{digest[:12]}: its value does not match its head"
            )
        return Fetched(raw, head)

    def _read_chunks(self, keys: list[str], size: int) -> list[bytes] | int:
        """The chunks ``keys``, read only if together they are no longer than
        ``size`` (checked by the server before it sends any): -1 if one is
        missing, -2 if they are longer."""
        parts: list[bytes] = []
        left = size
        for i in range(0, len(keys), CHUNK_BATCH):
            batch = keys[i : i + CHUNK_BATCH]
            got = self.cmd("read", lambda b=batch, n=left: self.scripts.chunks(keys=b, args=[n]))
            if got and isinstance(got[0], int):
                return got[0]
            parts += got
            left -= sum(len(p) for p in got)
        return parts

    def _touch(self, name: str, keys: list[str]) -> None:
        with contextlib.suppress(_Down):
            self.cmd("read", lambda: self._refresh(name, keys))

    def note_unusable(self, digest: str, cls: str = "") -> None:
        """The entry ``digest`` verified but could not be loaded here: a waiter
        waits for a new one, not for this one (`claim`)."""
        if not self.readable:
            return
        with contextlib.suppress(_Down):
            name = self.key_name("e", digest, cls=cls)
            blob = self.cmd("read", lambda: self.client.getrange(name, 0, TAG_BYTES - 1))
            if blob:
                self._note_stale(digest, blob)

    def _note_stale(self, digest: str, blob: bytes) -> None:
        with self.lock:
            if len(self.stale) >= 1024:
                self.stale.clear()
            self.stale[digest] = blob[:TAG_BYTES]

    def other_keys(self, within: float = 86400.0) -> tuple[list[str], list[str]]:
        """Ids of the other fleet keys whose hosts wrote to this namespace in the
        last ``within`` seconds (hosts given another key file, or a key being
        rotated): their entries are invisible to this host. Second: members of the
        set pcache never writes (not a key id), as ``repr``s of at most 24 bytes
        (for a log: no newline or terminal escape gets through). Reads at most
        `KEY_IDS_READ` members of at most `MAX_KEY_ID_BYTES` + 1 bytes each (cut
        server-side)."""
        if not self.readable:
            return [], []
        try:
            got = self.cmd(
                "read",
                lambda: self.scripts.ids(
                    keys=[self._key_ids],
                    args=[time.time() - within, KEY_IDS_READ, MAX_KEY_ID_BYTES + 1],
                ),
            )
        except _Down:
            return [], []
        ids, bad = set(), []
        for m in got if isinstance(got, list) else []:
            if isinstance(m, bytes) and re.fullmatch(rb"[0-9a-f]{16}", m):
                ids.add(m.decode())
            elif len(bad) < 3:
                bad.append(_quote(m))
        return sorted(ids - {self.key_id}), bad

    def _verify_head(
        self, name: str, digest: str, tag: bytes, text: bytes
    ) -> tuple[Head | None, tuple[str, str]]:
        if len(tag) + 1 + len(text) > MAX_HEAD_BYTES:
            return None, ("tampered", f"{digest[:12]}: a head of over {MAX_HEAD_BYTES} bytes")
        if not hmac.compare_digest(self._sign(name, text).encode(), tag):
            return None, ("tampered", f"{digest[:12]}: its head fails its signature")
        try:  # signed by a holder of the fleet key: parsed only now
            fields = json.loads(text)
            if not isinstance(fields, dict):
                raise ValueError("not an object")
        except (ValueError, RecursionError):
            return None, ("tampered", f"{digest[:12]}: its head is signed but not JSON")
        try:
            head = Head(**{name: fields[name] for name in _HEAD_FIELDS})
            ok = (
                head.digest == digest
                and isinstance(head.meta, dict)
                and isinstance(head.extra, dict)
                and all(isinstance(v, int) and v >= 0 for v in (head.raw_size, head.packed_size))
                and isinstance(head.chunks, int)
                # no chunks: the value is inline (and at most INLINE_BYTES long)
                and (
                    0 < head.chunks <= head.packed_size
                    or (head.chunks == 0 and head.packed_size <= INLINE_BYTES)
                )
                and _WRITER_ID.fullmatch(str(head.id)) is not None
            )
        except (KeyError, TypeError):
            ok = False
        if not ok:
            return None, ("tampered", f"{digest[:12]}: its head is signed but malformed")
        return head, ("", "")

    def _refresh(self, name: str, chunk_keys: list[str]) -> None:
        ms = int(self.config.ttl * 1000)
        pipe = self.client.pipeline(transaction=False)
        for k in (name, *chunk_keys):
            pipe.pexpire(k, ms)
        pipe.execute()

    def exists(self, digest: str, cls: str = "") -> bool | None:
        """Whether the entry's head is there (None: the remote cannot tell now)."""
        if not self.readable:
            return None
        try:
            name = self.key_name("e", digest, cls=cls)
            return bool(self.cmd("read", lambda: self.client.exists(name)))
        except _Down:
            return None

    # -- writing ----------------------------------------------------------------------

    def _sign(self, name: str, text: bytes) -> str:
        # HMAC(key, "pcache-remote-head\0" name "\0" text), from the keyed state of
        # its fixed prefix (`_head_mac`): the same bytes, one key schedule per process
        h = self._head_mac.copy()
        h.update(name.encode() + b"\0")
        h.update(text)
        return h.hexdigest()

    def put(
        self,
        digest: str,
        raw: bytes,
        meta: dict[str, Any],
        *,
        replace: bool = False,
        cls: str = "",
    ) -> int | None:
        """Write an entry (a large value's chunks, then its head; a small value with
        its head, in one key); returns the bytes sent, 0 if an entry was there already
        (and ``replace`` is false), None if nothing could be written."""
        if not self.writable:
            return None
        name = self.key_name("e", digest, cls=cls)
        packed, chunks, wid, head = self._pack(digest, name, raw, meta)
        chunk = self.key_name("c", digest, wid, cls=cls) + ":"
        if len(head) > MAX_HEAD_BYTES:  # never read back: not sent
            self.report(
                "write",
                "remote entry too large",
                ValueError(
                    f"{digest[:12]}: a head of {len(head)} bytes (at most {MAX_HEAD_BYTES})"
                ),
            )
            return None
        blob = head if chunks else head + b"\n" + packed
        px = int(self.config.ttl * 1000) if self.config.ttl else None
        client = self.client
        try:
            # Whether an entry is there (its tag); the whole head (bounded) only when
            # it is replaced, for the ids of the chunks to drop.
            end = MAX_HEAD_BYTES if replace else TAG_BYTES - 1
            old = self.cmd("write", lambda: client.getrange(name, 0, end))
            if old and not replace:
                return 0

            def send() -> None:
                pipe = client.pipeline(transaction=False)
                for i, c in enumerate(chunks):
                    pipe.set(f"{chunk}{i}", c, px=px)
                pipe.execute()

            if chunks:
                self.cmd("write", send)
            if not self.cmd("write", lambda: client.set(name, blob, px=px, nx=not replace)):
                # Another host's entry came first: ours is not needed.
                if chunks:
                    self.cmd(
                        "write",
                        lambda: client.delete(*[f"{chunk}{i}" for i in range(len(chunks))]),
                    )
                return 0
            if old:  # the replaced entry's chunks (its head is not trusted: ids only)
                self._drop_chunks(self.key_name("c", digest, cls=cls), old, keep=wid)
            if not self._announced:  # which keys write here (`other_keys`), for 30 days
                self.cmd("write", self._announce)
                self._announced = True
        except _Down:
            return None
        return len(packed) + len(head)

    def _pack(
        self, digest: str, name: str, raw: bytes, meta: dict[str, Any]
    ) -> tuple[bytes, list[bytes], str, bytes]:
        """An entry's compressed value, its chunks (none when the value fits in one:
        it goes with its head), its writer id and its signed head."""
        meta = dict(meta)
        extra = {k: v for k, v in (meta.pop("extra", None) or {}).items() if k not in _LOCAL_ONLY}
        packed = self._cctx.compress(raw)
        size = self.config.chunk_bytes
        if len(packed) <= min(size, INLINE_BYTES):
            chunks = []
        else:
            chunks = [packed[i : i + size] for i in range(0, len(packed), size)]
        wid = secrets.token_hex(8)
        fields = {
            "digest": digest,
            "id": wid,
            "raw_size": len(raw),
            "packed_size": len(packed),
            "packed_sha256": _sha(packed),
            "chunks": len(chunks),
            "meta": meta,
            "extra": extra,
            "created": time.time(),
            "writer": self.writer_name,
            "key_id": self.key_id,
        }
        # (JSON escapes newlines in strings: the text has none, `split_entry`.)
        text = json.dumps(fields, separators=(",", ":"), sort_keys=True).encode()
        return packed, chunks, wid, self._sign(name, text).encode() + b"\n" + text

    def _announce(self) -> None:
        now = time.time()
        pipe = self.client.pipeline(transaction=False)
        pipe.zadd(self._key_ids, {self.key_id: now})
        pipe.zremrangebyscore(self._key_ids, "-inf", now - 30 * 86400)
        pipe.execute()

    def _drop_chunks(self, chunk_prefix: str, old_head: bytes, keep: str) -> None:
        with contextlib.suppress(Exception):  # an unsigned head (at most 1 MiB): ids only
            fields = json.loads(split_entry(old_head)[1])
            wid, n = str(fields["id"]), int(fields["chunks"])
            if wid != keep and re.fullmatch(r"[0-9a-f]{1,64}", wid) and 0 < n <= 1 << 16:
                self.cmd(
                    "write",
                    lambda: self.client.delete(*[f"{chunk_prefix}:{wid}:{i}" for i in range(n)]),
                )
