"""The remote tier: executables shared by a fleet of hosts through Redis (or Valkey).

No JAX here (``pcache remote`` uses it). It sits behind the local store: a local
miss asks the remote; a remote hit is verified, loaded and copied into the local
store; a compile is stored locally, then written to the remote by a writer thread
(off the program's critical path, flushed at exit). One host compiles a program
for the whole fleet: before compiling, a host takes the key's *lease* (``SET NX``
with an expiry, renewed while it compiles and writes); the others wait for the
entry (bounded by the lock timeout) and load it, and a dead holder's lease expires
so another host takes over.

Keys, under one prefix per format, namespace and host class (`Remote.prefix`)::

    pcache:r<REMOTE_FORMAT>e<ENTRY_FORMAT>:<namespace>:<host class>:
        e:<digest>           the entry's head: "<hmac hex>\\n<json>" (`Head`)
        c:<digest>:<id>:<i>  chunk i of its zstd-compressed value (written first;
                             ``id`` is the writer's, so a replaced entry never
                             mixes chunks of two writers)
        l:<digest>           the lease: a nonce and its HMAC, with an expiry

Trust: the head is signed (HMAC-SHA256) with the fleet key (a file only its owner
may read, `JAX_PCACHE_REMOTE_SECRET_FILE`), over the head's Redis key name and
its JSON, which holds the sha256 and size of the value: a head that does not
verify is never read further, a value that does not match its head is never
loaded. Nothing is unpickled. A head names the id of the key that signed it, so a
host with another fleet key says so (once) instead of calling the fleet's
entries forged, and never overwrites them.

Host class: XLA:CPU compiles for the features of the host's CPU, so an executable
from one CPU model may not run on another. The prefix names the machine
architecture and CPU feature flags: hosts share entries only with hosts of the
same class.

Hostile input: nothing is read unbounded. A head is at most `MAX_HEAD_BYTES`; a
value's chunks are read only once the server (a script) has checked that they are
no longer than the signed head says; a lease at most `TAG_BYTES`; the key-ids set
`KEY_IDS_READ` members cut server-side. A lease is a nonce signed with the fleet
key: one pcache did not write (another shape, no expiry, an expiry beyond the
lease setting) is void, taken over at once by a host that writes.

Failure policy: a remote that fails (down, slow past the timeout, refusing
commands) is switched off by a circuit breaker, with one warning: open for
`BREAKER_OPEN` seconds (doubling while it keeps failing), then half-open (the next
command is a probe: success closes it, sharing resumes). One that answers but
costs more than it saves (`LOOKUP_ROUND_TRIPS` round trips against a compile
here) is skipped for `SLOW_SKIP`. One that is full (out of memory) is only read
from from then on. The program never waits on it longer than the timeout per
command, or the lock timeout for a live lease.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import functools
import hashlib
import hmac
import json
import os
import platform
import queue
import re
import secrets
import socket
import threading
import time
import uuid
import weakref
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import zstandard

from pcache._errors import PcacheError
from pcache._signing import ENTRY_FORMAT, read_key_file

#: What the keys and heads below mean; in the prefix, so formats never mix.
REMOTE_FORMAT = 1
MAX_HEAD_BYTES = 1 << 20  # a head is a few KB; a longer one is never read whole
TAG_BYTES = 64  # a head starts with its HMAC (hex): what tells two heads apart
VOID = b"void"  # a lease given up by a host that will store nothing
VOID_SECONDS = 10.0
DEFAULT_CHUNK_BYTES = 1 << 20
CHUNK_BATCH = 64  # chunks read per command
FAST_BYTES = 1 << 20  # a value this small comes with its head (one round trip)
DEFAULT_TIMEOUT = 2.0
DEFAULT_LEASE = 30.0
POLL = (0.02, 0.25)  # a waiter's first and longest pause between looks
LEASE_TOKEN_LEN = 48  # 16 hex of nonce, 32 of HMAC under the fleet key
LEASE_SLACK_MS = 1000  # a lease's expiry may exceed the setting by this much (renewals)
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
#: Uploads of local entries the remote lacks (`Remote.offer`).
UPLOAD_RATE = 20.0  # checks a second
UPLOAD_BURST = 64
UPLOAD_BACKLOG = 256  # never with this many writes pending
KEY_IDS_READ = 64  # members of the key-ids set read, each cut to MAX_KEY_ID_BYTES + 1
MAX_KEY_ID_BYTES = 64
STATE_FILE = "remote-state.json"  # in the cache directory: the last state change
NAMESPACE_RE = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
#: Entry metadata only the local directory's secret vouches for: never sent.
_LOCAL_ONLY = ("hmac", "head_hmac", "format")

__all__ = [
    "DEFAULT_LEASE",
    "DEFAULT_TIMEOUT",
    "REMOTE_FORMAT",
    "Fetched",
    "Head",
    "Lease",
    "Remote",
    "RemoteConfig",
    "RemoteError",
    "host_class",
    "key_id",
    "redact",
]

_RELEASE = """
if redis.call('get', KEYS[1]) ~= ARGV[1] then return 0 end
if tonumber(ARGV[2]) > 0 then return redis.call('set', KEYS[1], 'void', 'PX', ARGV[2]) end
return redis.call('del', KEYS[1])
"""
_RENEW = """
if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('pexpire', KEYS[1], ARGV[2])
end
return 0
"""
#: Replace a lease pcache did not write (the one seen: its first bytes and length).
_TAKE = """
if redis.call('getrange', KEYS[1], 0, 63) ~= ARGV[1] then return 0 end
if redis.call('strlen', KEYS[1]) ~= tonumber(ARGV[2]) then return 0 end
redis.call('set', KEYS[1], ARGV[3], 'PX', ARGV[4])
return 1
"""
#: Chunks, read only if together they are at most ARGV[1] bytes: {-1} when one is
#: missing, {-2} when they are longer.
_CHUNKS = """
local total = 0
for _, k in ipairs(KEYS) do
  local n = redis.call('strlen', k)
  if n == 0 then return {-1} end
  total = total + n
end
if total > tonumber(ARGV[1]) then return {-2} end
return redis.call('mget', unpack(KEYS))
"""
#: An entry's head (at most ARGV[1] bytes) and, when its JSON (not verified here:
#: the caller verifies it) names at most 64 chunks of at most ARGV[2] bytes in all,
#: those chunks (named ARGV[3] .. id .. ':' .. i), read only if together they are
#: exactly that long: {head, chunks...}; {head, -1} when one is missing, {head, -2}
#: when they are another length; {head} when the caller reads them itself.
_GET = """
local head = redis.call('getrange', KEYS[1], 0, tonumber(ARGV[1]))
if #head == 0 then return {head} end
local nl = string.find(head, '\\n', 1, true)
if not nl then return {head} end
local ok, f = pcall(cjson.decode, string.sub(head, nl + 1))
if not ok or type(f) ~= 'table' then return {head} end
local id, n, size = f['id'], f['chunks'], f['packed_size']
if type(id) ~= 'string' or #id > 64 or not string.match(id, '^[0-9a-f]+$') then return {head} end
if type(n) ~= 'number' or type(size) ~= 'number' then return {head} end
if n < 1 or n > 64 or n ~= math.floor(n) or size > tonumber(ARGV[2]) then return {head} end
local names, total = {}, 0
for i = 0, n - 1 do
  local k = ARGV[3] .. id .. ':' .. string.format('%d', i)
  local len = redis.call('strlen', k)
  if len == 0 then return {head, -1} end
  total = total + len
  names[#names + 1] = k
end
if total ~= size then return {head, -2} end
local out = redis.call('mget', unpack(names))
table.insert(out, 1, head)
return out
"""
#: Members of the key-ids set scored since ARGV[1]: at most ARGV[2], each cut to
#: ARGV[3] bytes.
_KEY_IDS = """
local out = {}
local got = redis.call('zrangebyscore', KEYS[1], ARGV[1], '+inf', 'LIMIT', 0, ARGV[2])
for _, m in ipairs(got) do
  table.insert(out, string.sub(m, 1, tonumber(ARGV[3])))
end
return out
"""


class RemoteError(PcacheError):
    """The remote tier cannot be used (its settings, its fleet key, the server)."""


@dataclasses.dataclass(frozen=True)
class RemoteConfig:
    """The remote tier's settings (`pcache._config.Settings.remote`)."""

    url: str
    secret_file: str | None
    namespace: str = "default"
    read_only: bool = False
    ttl: float | None = None  # seconds an entry lives unused; None: until evicted
    timeout: float = DEFAULT_TIMEOUT  # per command and connect
    lease: float = DEFAULT_LEASE  # a holder's lease expiry (renewed at a third of it)
    wait: float = 600.0  # how long to wait for another host's compile
    chunk_bytes: int = DEFAULT_CHUNK_BYTES


def redact(url: str) -> str:
    """``url`` without its password, in the authority or the query (for logs,
    stats and `pcache env`)."""
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:
        return "<unparsable url>"
    if password is not None:
        netloc = parts.netloc.rsplit("@", 1)[1]
        user = f"{parts.username}:***@" if parts.username else ":***@"
        parts = parts._replace(netloc=user + netloc)
    if parts.query:
        query = [
            (k, "***" if k.lower() in _SECRET_PARAMS else v)
            for k, v in parse_qsl(parts.query, keep_blank_values=True)
        ]
        parts = parts._replace(query=urlencode(query, safe="*/"))
    out = urlunsplit(parts)
    if not parts.netloc and url.startswith(f"{parts.scheme}://"):
        out = out.replace(f"{parts.scheme}:", f"{parts.scheme}://", 1)  # unix:///path
    return out


_SECRET_PARAMS = {"password", "ssl_password", "username", "ssl_keyfile", "ssl_certfile"}


def check_url(url: str) -> str:
    try:
        scheme = urlsplit(url).scheme
    except ValueError:
        scheme = ""
    if scheme not in ("redis", "rediss", "unix"):
        raise RemoteError(
            f"remote {redact(url)!r}: expected redis://host:port/db, rediss://host:port/db "
            "or unix:///path/to/socket?db=0"
        )
    return url


def key_id(key: bytes) -> str:
    """A name for a fleet key that reveals nothing of it (in every head)."""
    return hmac.new(key, b"pcache-fleet-key-id", hashlib.sha256).hexdigest()[:16]


def host_class() -> str:
    """The machine architecture and CPU feature flags, hashed: XLA:CPU code is built
    for them, so only hosts of one class share entries."""
    flags = ""
    with contextlib.suppress(OSError):
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                name, _, value = line.partition(":")
                if name.strip().lower() in ("flags", "features"):
                    flags = " ".join(sorted(value.split()))
                    break
    if not flags:
        # Unknown features: share with nobody but this host (never load code built for
        # instructions this CPU may lack).
        flags = f"host {socket.gethostname()} {uuid.getnode()}"
    text = f"{platform.machine()}\0{flags}"
    return f"{platform.machine() or 'unknown'}-{hashlib.sha256(text.encode()).hexdigest()[:12]}"


@dataclasses.dataclass(frozen=True)
class Head:
    """What an entry's head says (all of it signed)."""

    digest: str
    id: str
    raw_size: int
    packed_size: int
    sha256: str
    chunks: int
    meta: dict[str, Any]
    extra: dict[str, Any]
    created: float
    writer: str
    key_id: str


@dataclasses.dataclass
class Fetched:
    """``raw`` is the verified value, or None with ``miss`` saying why: missing,
    incomplete (a chunk evicted or expired), tampered (fails its signature or
    its checksum), foreign-key (signed with another fleet key), off."""

    raw: bytes | None
    head: Head | None = None
    miss: str = ""
    detail: str = ""


@dataclasses.dataclass
class Lease:
    """`Remote.claim`'s outcome: ``held`` (ours to compile under: write, then
    release), ``ready`` (another host stored it while we waited), ``absent``
    (nobody is compiling it: a host that may not write compiles it itself),
    ``timeout``, ``off`` (the remote failed)."""

    outcome: str
    digest: str = ""
    token: str = ""
    waited: float = 0.0
    took_over: bool = False  # the previous holder's lease expired without an entry

    @property
    def held(self) -> bool:
        return self.outcome == "held"


Report = Callable[[str, str, BaseException | None], None]  # (what, cause, exception)


class _Down(Exception):
    """A command failed (already reported): the caller gives up quietly."""


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
        self.key_id = key_id(key)
        self.host_class = host_class()
        ns = config.namespace
        if not NAMESPACE_RE.match(ns):
            raise RemoteError(
                f"remote namespace {ns[:80]!r}: use 1-64 of A-Z a-z 0-9 . _ - "
                "(JAX_PCACHE_REMOTE_NAMESPACE)"
            )
        # Each fleet key has its own key space: hosts with different keys never read,
        # wait for or overwrite each other's entries (`other_keys` tells them apart).
        self.space = f"{self.host_class}.{self.key_id}"
        self.prefix = f"{prefix_root(ns)}{self.space}:"
        self._key_ids = f"{prefix_root(ns)}key-ids"
        self._announced = False
        self._stale: dict[str, bytes] = {}  # digest -> tag of a head found unusable
        self._report = report or (lambda what, cause, exc: None)
        self._redis_errors = (redis.RedisError, OSError)
        self._oom = getattr(redis.exceptions, "OutOfMemoryError", ())
        self._response_error = redis.exceptions.ResponseError
        self.client = connect(config.url, config.timeout)
        self.full = False  # out of memory: read from only, for the rest of the process
        self.state_reason = "JAX_PCACHE_REMOTE_READ_ONLY" if config.read_only else ""
        self._lock = threading.Lock()
        # The circuit breaker: closed (``_open_until`` 0); open until ``_open_until``
        # after ``_failures`` failures in a row; half-open once that time has passed
        # (the next command is the probe: success closes it, failure opens it longer).
        self._failures = 0
        self._open_until = 0.0
        # Latency: round trips of the commands a lookup waits for (the last few),
        # against what a hit saves (compile seconds seen here); too slow: skipped
        # until ``_slow_until``.
        self._rtts: collections.deque[float] = collections.deque(maxlen=RTT_SAMPLES)
        self._compile_s: float | None = None
        self._slow_until = 0.0
        self._slow_times = 0
        self._held: dict[str, str] = {}  # digest -> token of a lease this process holds
        self._renewer: threading.Thread | None = None
        self._jobs: queue.Queue | None = None
        self._writer: threading.Thread | None = None
        self._offered: set[str] = set()  # digests offered for upload (`offer`)
        self._bucket = (float(UPLOAD_BURST), time.monotonic())
        self._cctx = zstandard.ZstdCompressor(level=3, write_content_size=True)
        self.writer_name = f"{socket.gethostname()}:{os.getpid()}"
        self._release = self.client.register_script(_RELEASE)
        self._renew = self.client.register_script(_RENEW)
        self._take = self.client.register_script(_TAKE)
        self._chunks = self.client.register_script(_CHUNKS)
        # EVAL, not EVALSHA: one round trip on a new connection too (no NOSCRIPT,
        # SCRIPT LOAD, EVALSHA); the server caches the compiled script by its hash.
        self._get = lambda keys, args: self.client.eval(_GET, len(keys), *keys, *args)
        self._ids = self.client.register_script(_KEY_IDS)
        me = weakref.ref(self)  # the fork hook must not keep a closed tier alive
        os.register_at_fork(after_in_child=lambda: (r := me()) and r._after_fork())

    # -- state ------------------------------------------------------------------------

    @property
    def state(self) -> str:
        """on, read-only (configured, or the server is full), open (failing: off
        until a retry), half-open (the next command is the retry), slow (skipped:
        its latency exceeds what it saves)."""
        now = time.monotonic()
        if self._open_until:
            return "open" if now < self._open_until else "half-open"
        if now < self._slow_until:
            return "slow"
        return "read-only" if self.config.read_only or self.full else "on"

    @property
    def readable(self) -> bool:
        return self.state in ("on", "read-only", "half-open")

    @property
    def writable(self) -> bool:
        return self.state in ("on", "half-open") and not (self.config.read_only or self.full)

    def info(self) -> dict[str, Any]:
        """The breaker and latency state, for stats."""
        now = time.monotonic()
        with self._lock:
            rtt = min(self._rtts) if self._rtts else None
            return {
                "state": self.state,
                "reason": self.state_reason,
                "failures": self._failures,
                "retry_in": max(0.0, self._open_until - now) if self._open_until else None,
                "slow_for": max(0.0, self._slow_until - now) if now < self._slow_until else None,
                "round_trip_ms": None if rtt is None else rtt * 1000,
            }

    def _fail(self, what: str, exc: BaseException) -> None:
        """A command failed: the breaker opens (for longer after each failure in a
        row; only read from, for the rest of the process, if the server is full)."""
        full = isinstance(exc, self._oom) or (
            isinstance(exc, self._response_error) and str(exc).startswith("OOM")
        )
        with self._lock:
            if full:
                self.full = True
                self.state_reason = f"full: {_short(exc)}"
            else:
                self._failures += 1
                wait = min(BREAKER_OPEN[0] * 2 ** (self._failures - 1), BREAKER_OPEN[1])
                self._open_until = time.monotonic() + wait
                self.state_reason = (
                    f"{what}: {type(exc).__name__}: {_short(exc)} (retrying in {wait:.0f} s)"
                )
            self._held.clear()
        self._report(what, "remote full" if full else "remote unavailable", exc)

    def _ok(self) -> None:
        if not self._open_until:
            return
        with self._lock:
            if not self._open_until:
                return
            failures, self._failures, self._open_until = self._failures, 0, 0.0
            self.state_reason = ""
        self._report("probe", "remote recovered", RuntimeError(f"after {failures} failures"))

    def _cmd(self, what: str, fn: Callable[[], Any], timed: bool = False) -> Any:
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
                self._report(what, "remote wrong type", ValueError(_short(exc)))
                raise _Down from exc
            self._fail(what, exc)
            raise _Down from exc
        if timed:
            self._sample(time.monotonic() - t0)
        self._ok()
        return out

    def note_compile(self, seconds: float) -> None:
        """A compile this host did or was spared (what a hit saves)."""
        with self._lock:
            if seconds > 0:
                c = self._compile_s
                self._compile_s = seconds if c is None else 0.8 * c + 0.2 * seconds

    def _sample(self, seconds: float) -> None:
        with self._lock:
            self._rtts.append(seconds)
            if len(self._rtts) < RTT_SAMPLES:
                return
            rtt = min(self._rtts)  # the floor: a loaded host's hiccups are not latency
            saves = max(self._compile_s or DEFAULT_SAVING, MIN_SAVING)
            if rtt * LOOKUP_ROUND_TRIPS <= saves:
                return
            self._slow_times += 1
            wait = min(SLOW_SKIP[0] * 2 ** (self._slow_times - 1), SLOW_SKIP[1])
            self._slow_until = time.monotonic() + wait
            self._rtts.clear()  # measured afresh when the skip ends
            why = (
                f"round trips of {rtt * 1000:.0f} ms, {LOOKUP_ROUND_TRIPS} per lookup, cost more "
                f"than a hit saves (compiles of {saves * 1000:.0f} ms); skipped for {wait:.0f} s"
            )
            self.state_reason = f"slow: {why}"
        self._report("latency", "remote slow", TimeoutError(why))

    def _after_fork(self) -> None:
        self._lock = threading.Lock()
        self._held = {}
        self._renewer = None
        self._jobs = None
        self._writer = None
        # redis-py's pool notices the new pid and opens new connections.

    def _k(self, kind: str, digest: str, *rest: object) -> str:
        return ":".join((f"{self.prefix}{kind}", digest, *map(str, rest)))

    # -- reading ----------------------------------------------------------------------

    def get(self, digest: str) -> Fetched:
        """The entry ``digest``, verified, or why not (never raises). Nothing is read
        unbounded: the head is at most `MAX_HEAD_BYTES`, and the value's chunks are
        read only if together they are exactly the size the signed head gives."""
        if not self.readable:
            return Fetched(None, miss="off")
        name = self._k("e", digest)
        chunk_prefix = self._k("c", digest) + ":"
        try:  # one round trip: the head, and the value too when it is small
            got = self._cmd(
                "read",
                lambda: self._get(keys=[name], args=[MAX_HEAD_BYTES, FAST_BYTES, chunk_prefix]),
                True,
            )
        except _Down:
            return Fetched(None, miss="off")
        blob = got[0] if isinstance(got, list) and got and isinstance(got[0], bytes) else b""
        if not blob:
            return Fetched(None, miss="missing")
        head, why = self._verify_head(name, digest, blob)
        if head is None:
            self._note_stale(digest, blob)
            return Fetched(None, miss=why[0], detail=why[1])
        keys = [self._k("c", digest, head.id, i) for i in range(head.chunks)]
        rest = got[1:]
        if not rest:  # a large value: read now, bounded by its signed size
            try:
                chunks = self._read_chunks(keys, head.packed_size)
            except _Down:
                return Fetched(None, miss="off")
            rest = [chunks] if isinstance(chunks, int) else chunks
        if len(rest) == 1 and isinstance(rest[0], int):  # a chunk missing, or too long
            self._note_stale(digest, blob)
            if rest[0] == -1:
                return Fetched(None, miss="incomplete", detail=f"{digest[:12]}: a chunk is gone")
            return Fetched(
                None,
                miss="tampered",
                detail=f"{digest[:12]}: its chunks are not the length its head says",
            )
        # (Every byte is checked below: the length and sha256 the signed head gives.)
        parts = [p for p in rest if isinstance(p, bytes)]
        if self.config.ttl and self.writable:  # off the critical path
            self.submit(lambda: self._touch(name, keys))
        packed = b"".join(parts)
        raw = None
        if len(packed) == head.packed_size:
            with contextlib.suppress(Exception):  # a frame that lies about its size, ...
                if zstandard.get_frame_parameters(packed).content_size == head.raw_size:
                    raw = zstandard.ZstdDecompressor().decompress(
                        packed, max_output_size=head.raw_size
                    )
        if raw is None or len(raw) != head.raw_size or _sha(raw) != head.sha256:
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
            got = self._cmd("read", lambda b=batch, n=left: self._chunks(keys=b, args=[n]))
            if got and isinstance(got[0], int):
                return got[0]
            parts += got
            left -= sum(len(p) for p in got)
        return parts

    def _touch(self, name: str, keys: list[str]) -> None:
        with contextlib.suppress(_Down):
            self._cmd("read", lambda: self._refresh(name, keys))

    def note_unusable(self, digest: str) -> None:
        """The entry ``digest`` verified but could not be loaded here: a waiter
        waits for a new one, not for this one (`claim`)."""
        if not self.readable:
            return
        with contextlib.suppress(_Down):
            blob = self._cmd(
                "read", lambda: self.client.getrange(self._k("e", digest), 0, TAG_BYTES - 1)
            )
            if blob:
                self._note_stale(digest, blob)

    def _note_stale(self, digest: str, blob: bytes) -> None:
        with self._lock:
            if len(self._stale) >= 1024:
                self._stale.clear()
            self._stale[digest] = blob[:TAG_BYTES]

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
            got = self._cmd(
                "read",
                lambda: self._ids(
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
        self, name: str, digest: str, blob: bytes
    ) -> tuple[Head | None, tuple[str, str]]:
        if len(blob) > MAX_HEAD_BYTES:
            return None, ("tampered", f"{digest[:12]}: a head of over {MAX_HEAD_BYTES} bytes")
        tag, _, text = blob.partition(b"\n")
        if not hmac.compare_digest(self._sign(name, text).encode(), tag):
            return None, ("tampered", f"{digest[:12]}: its head fails its signature")
        try:  # signed by a holder of the fleet key: parsed only now
            fields = json.loads(text)
            if not isinstance(fields, dict):
                raise ValueError("not an object")
        except (ValueError, RecursionError):
            return None, ("tampered", f"{digest[:12]}: its head is signed but not JSON")
        try:
            head = Head(**{f.name: fields[f.name] for f in dataclasses.fields(Head)})
            ok = (
                head.digest == digest
                and isinstance(head.meta, dict)
                and isinstance(head.extra, dict)
                and all(isinstance(v, int) and v >= 0 for v in (head.raw_size, head.packed_size))
                and isinstance(head.chunks, int)
                and 0 < head.chunks <= head.packed_size
                and re.fullmatch(r"[0-9a-f]{1,64}", str(head.id)) is not None
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

    def exists(self, digest: str) -> bool | None:
        """Whether the entry's head is there (None: the remote cannot tell now)."""
        if not self.readable:
            return None
        try:
            return bool(self._cmd("read", lambda: self.client.exists(self._k("e", digest))))
        except _Down:
            return None

    # -- writing ----------------------------------------------------------------------

    def _sign(self, name: str, text: bytes) -> str:
        h = hmac.new(self._key, b"pcache-remote-head\0" + name.encode() + b"\0", hashlib.sha256)
        h.update(text)
        return h.hexdigest()

    def put(
        self, digest: str, raw: bytes, meta: dict[str, Any], *, replace: bool = False
    ) -> int | None:
        """Write an entry (chunks, then its head); returns the bytes sent, 0 if an
        entry was there already (and ``replace`` is false), None if nothing could
        be written."""
        if not self.writable:
            return None
        meta = dict(meta)
        extra = {k: v for k, v in (meta.pop("extra", None) or {}).items() if k not in _LOCAL_ONLY}
        packed = self._cctx.compress(raw)
        size = self.config.chunk_bytes
        chunks = [packed[i : i + size] for i in range(0, len(packed), size)]
        wid = secrets.token_hex(8)
        fields = {
            "digest": digest,
            "id": wid,
            "raw_size": len(raw),
            "packed_size": len(packed),
            "sha256": _sha(raw),
            "chunks": len(chunks),
            "meta": meta,
            "extra": extra,
            "created": time.time(),
            "writer": self.writer_name,
            "key_id": self.key_id,
        }
        text = json.dumps(fields, sort_keys=True, separators=(",", ":")).encode()
        name = self._k("e", digest)
        blob = self._sign(name, text).encode() + b"\n" + text
        if len(blob) > MAX_HEAD_BYTES:  # never read back: not sent
            self._report(
                "write",
                "remote entry too large",
                ValueError(
                    f"{digest[:12]}: a head of {len(blob)} bytes (at most {MAX_HEAD_BYTES})"
                ),
            )
            return None
        px = int(self.config.ttl * 1000) if self.config.ttl else None
        client = self.client
        try:
            # Whether an entry is there (its tag); the whole head (bounded) only when
            # it is replaced, for the ids of the chunks to drop.
            end = MAX_HEAD_BYTES if replace else TAG_BYTES - 1
            old = self._cmd("write", lambda: client.getrange(name, 0, end))
            if old and not replace:
                return 0

            def send() -> None:
                pipe = client.pipeline(transaction=False)
                for i, c in enumerate(chunks):
                    pipe.set(self._k("c", digest, wid, i), c, px=px)
                pipe.execute()

            self._cmd("write", send)
            if not self._cmd("write", lambda: client.set(name, blob, px=px, nx=not replace)):
                # Another host's entry came first: ours is not needed.
                self._cmd(
                    "write",
                    lambda: client.delete(
                        *[self._k("c", digest, wid, i) for i in range(len(chunks))]
                    ),
                )
                return 0
            if old:  # the replaced entry's chunks (its head is not trusted: ids only)
                self._drop_chunks(digest, old, keep=wid)
            if not self._announced:  # which keys write here (`other_keys`), for 30 days
                now = time.time()

                def announce() -> None:
                    pipe = client.pipeline(transaction=False)
                    pipe.zadd(self._key_ids, {self.key_id: now})
                    pipe.zremrangebyscore(self._key_ids, "-inf", now - 30 * 86400)
                    pipe.execute()

                self._cmd("write", announce)
                self._announced = True
        except _Down:
            return None
        return len(packed) + len(blob)

    def _drop_chunks(self, digest: str, old_head: bytes, keep: str) -> None:
        with contextlib.suppress(Exception):  # an unsigned head (at most 1 MiB): ids only
            fields = json.loads(old_head.partition(b"\n")[2])
            wid, n = str(fields["id"]), int(fields["chunks"])
            if wid != keep and re.fullmatch(r"[0-9a-f]{1,64}", wid) and 0 < n <= 1 << 16:
                self._cmd(
                    "write",
                    lambda: self.client.delete(*[self._k("c", digest, wid, i) for i in range(n)]),
                )

    def offer(self, digest: str) -> bool:
        """Whether to check (and upload) a local entry the remote may lack: once
        per digest and process, at most `UPLOAD_RATE` a second (`UPLOAD_BURST` at
        once), never with a writer backlog."""
        if not self.writable:
            return False
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

    def close(self) -> None:
        """Stop the writer thread (after `flush`) and close the connections."""
        with self._lock:
            jobs, writer = self._jobs, self._writer
            self._jobs = self._writer = None
        if jobs is not None and writer is not None:
            jobs.put(None)
        with contextlib.suppress(Exception):
            self.client.close()

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
        """Wait (at most ``timeout`` s) for the writes handed to the writer thread;
        False if some are still pending."""
        jobs = self._jobs
        if jobs is None or self._writer is None:
            return True
        deadline = time.monotonic() + timeout
        while jobs.unfinished_tasks:
            if time.monotonic() >= deadline or not self._writer.is_alive():
                return False
            time.sleep(0.01)
        return True

    # -- single-flight ----------------------------------------------------------------

    def _token(self, name: str) -> str:
        nonce = secrets.token_hex(8)
        return nonce + self._lease_mac(name, nonce)

    def _lease_mac(self, name: str, nonce: str) -> str:
        msg = b"pcache-lease\0" + name.encode() + b"\0" + nonce.encode()
        return hmac.new(self._key, msg, hashlib.sha256).hexdigest()[:32]

    def _lease_kind(self, name: str, value: bytes, length: int, pttl: int) -> str:
        """What the lease ``name`` is: ``none`` (no lease), ``void`` (its holder
        stores nothing), ``live`` (a holder of the fleet key is compiling),
        ``long`` (a holder's, with an expiry beyond this host's lease setting),
        or ``forged`` (not pcache's: another shape, no expiry, too long)."""
        if pttl == -2 or (length == 0 and pttl < 0):
            return "none"
        ms = max(1, int(self.config.lease * 1000))
        if pttl == -1 or pttl > ms + LEASE_SLACK_MS:
            forged = "forged"
        else:
            forged = ""
        if value == VOID and length == len(VOID):
            return forged or "void"
        if length == LEASE_TOKEN_LEN and re.fullmatch(rb"[0-9a-f]{48}", value):
            nonce, mac = value[:16].decode(), value[16:].decode()
            if hmac.compare_digest(self._lease_mac(name, nonce), mac):
                return "long" if forged else "live"
        return "forged"

    def claim(self, digest: str, wait: float | None = None) -> Lease:
        """Take the lease for ``digest``, or wait (at most ``wait`` seconds, default
        ``config.wait``) for the host that holds it: until it stores an entry
        (``ready``), says it will store none (``absent``: compile here, no lease),
        or its lease ends without one (we take over). A host that may not write
        takes no lease, but waits the same way.

        Leases are signed with the fleet key, and read bounded (`TAG_BYTES`): one
        pcache did not write (no expiry, one beyond the lease, another shape) is
        void: a writer takes it over at once, a reader compiles without it."""
        if not self.readable:
            return Lease("off", digest)
        wait = self.config.wait if wait is None else max(0.0, wait)
        name, head = self._k("l", digest), self._k("e", digest)
        token = self._token(name)
        with self._lock:  # the unusable head our lookup found is not "ready"
            stale = self._stale.pop(digest, None)
        ms = max(1, int(self.config.lease * 1000))
        start = time.monotonic()
        pause, took_over, waited = POLL[0], False, False
        client = self.client

        def look() -> list:
            pipe = client.pipeline(transaction=False)
            pipe.getrange(head, 0, TAG_BYTES - 1)
            pipe.getrange(name, 0, TAG_BYTES - 1)
            pipe.strlen(name)
            pipe.pttl(name)
            return pipe.execute()

        try:
            while True:
                if self.writable and self._cmd(
                    "lease", lambda: client.set(name, token, nx=True, px=ms), True
                ):
                    self._hold(digest, token)
                    spent = time.monotonic() - start if waited else 0.0
                    return Lease("held", digest, token, spent, took_over)
                while True:
                    if not self.readable:
                        return Lease("off", digest, waited=time.monotonic() - start)
                    tag, value, length, pttl = self._cmd("lease", look, True)
                    spent = time.monotonic() - start if waited else 0.0
                    if tag and tag != stale:
                        return Lease("ready", digest, waited=spent)
                    kind = self._lease_kind(name, value, length, pttl)
                    if kind in ("void", "long"):
                        return Lease("absent", digest, waited=spent)
                    if kind == "forged":
                        self._report(
                            "lease",
                            "remote lease forged",
                            ValueError(
                                f"{digest[:12]}: a lease pcache did not write "
                                f"({_quote(value)}, {length} bytes, expiry "
                                f"{'none' if pttl == -1 else f'{pttl} ms'}); ignored"
                            ),
                        )
                        if not self.writable:
                            return Lease("absent", digest, waited=spent)
                        args = [value, length, token, ms]
                        if self._cmd("lease", lambda a=args: self._take(keys=[name], args=a)):
                            self._hold(digest, token)
                            return Lease("held", digest, token, spent, waited)
                        continue  # it changed: look again
                    if kind == "none":  # released or expired without an entry
                        if not self.writable:
                            return Lease("absent", digest, waited=spent)
                        took_over = waited
                        break
                    left = start + wait - time.monotonic()
                    if left <= 0:
                        return Lease("timeout", digest, waited=time.monotonic() - start)
                    time.sleep(min(pause, left))
                    pause, waited = min(pause * 1.5, POLL[1]), True
        except _Down:
            return Lease("off", digest, waited=time.monotonic() - start)

    def release(self, lease: Lease, stored: bool = False) -> None:
        """Give ``lease`` up. Not ``stored``: nothing is coming from this host (a
        compile error, a program that cannot be serialized): the lease is left as
        `VOID` for a little while, so the hosts waiting for it compile at once, side
        by side, instead of taking it over one after another."""
        if not lease.held:
            return
        lease.outcome = "released"
        with self._lock:
            if self._held.get(lease.digest) == lease.token:
                del self._held[lease.digest]
        if self._open_until and time.monotonic() < self._open_until:
            return  # it expires on its own
        ms = 0 if stored else max(1, int(min(self.config.lease, VOID_SECONDS) * 1000))
        name = self._k("l", lease.digest)
        with contextlib.suppress(_Down):
            self._cmd("lease", lambda: self._release(keys=[name], args=[lease.token, ms]))

    def _hold(self, digest: str, token: str) -> None:
        with self._lock:
            self._held[digest] = token
            if self._renewer is None or not self._renewer.is_alive():
                t = threading.Thread(target=self._renew_loop, name="pcache-lease", daemon=True)
                try:
                    t.start()
                except RuntimeError:  # the lease expires on its own: others take over
                    return
                self._renewer = t

    def _renew_loop(self) -> None:
        ms = max(1, int(self.config.lease * 1000))
        while True:
            time.sleep(self.config.lease / 3)
            with self._lock:
                held = list(self._held.items())
                if not held:
                    self._renewer = None
                    return
            for digest, token in held:
                name = self._k("l", digest)
                try:
                    self._cmd("lease", lambda n=name, t=token: self._renew(keys=[n], args=[t, ms]))
                except _Down:
                    break

    # -- maintenance (pcache remote) ----------------------------------------------------

    def ping(self) -> float:
        """Seconds for one round trip; raises the client's error."""
        t0 = time.perf_counter()
        self.client.ping()
        return time.perf_counter() - t0


def _short(exc: BaseException) -> str:
    return str(exc)[:200]


def _quote(value: object) -> str:
    """``value`` for a log line: a ``repr`` of at most 24 bytes (no newline or
    terminal escape survives ``repr``)."""
    if isinstance(value, (bytes, str)) and len(value) > 24:
        return repr(value[:24]) + "..."
    return repr(value)


# -- maintenance: what `pcache remote stats|gc` see and remove -----------------------------

ROOT = "pcache"
ORPHAN_AGE = (
    3600.0  # a chunk without its head is removed after this long (a write may be under way)
)


@functools.cache
def _no_setinfo() -> dict[str, Any]:
    """Client arguments for no CLIENT SETINFO on connect (two round trips fewer per
    new connection: what a slow remote makes each new connection cost)."""
    try:
        import redis.driver_info  # noqa: F401  (redis-py >= 7)

        return {"driver_info": None}
    except ImportError:  # redis-py 5 and 6
        return {"lib_name": None, "lib_version": None}


def connect(url: str, timeout: float = DEFAULT_TIMEOUT):
    """A client for ``url`` with the tier's timeouts and no retries."""
    import redis
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    try:
        return redis.Redis.from_url(
            check_url(url),
            socket_timeout=timeout,
            socket_connect_timeout=timeout,
            retry=Retry(NoBackoff(), 0),
            retry_on_timeout=False,
            protocol=2,  # no HELLO (nor what RESP3 negotiates next) on each connect
            **_no_setinfo(),
        )
    except ValueError as exc:  # redis-py's parse of a malformed URL
        raise RemoteError(f"remote {redact(url)!r}: {exc}") from None


@dataclasses.dataclass
class _Key:
    raw: bytes  # the key's name as the server has it (any bytes)
    name: str  # decoded, undecodable bytes as surrogates (`_enc` gives them back)
    fmt: str  # "r1e3"
    namespace: str
    host: str
    kind: str  # e, c, l
    digest: str
    id: str = ""


def _enc(name: str) -> bytes:
    return name.encode("utf-8", "surrogateescape")


def _parse(raw: bytes | str) -> _Key | None:
    if isinstance(raw, str):
        raw = _enc(raw)
    name = raw.decode("utf-8", "surrogateescape")
    parts = name.split(":", 5)
    if len(parts) != 6 or parts[0] != ROOT or parts[4] not in ("e", "c", "l"):
        return None
    k = _Key(raw, name, *parts[1:])
    if k.kind == "c":
        rest = k.digest.rsplit(":", 2)
        if len(rest) != 3:
            return None
        k.digest, k.id = rest[0], rest[1]
    return k


def _scan(client, match: str) -> Iterator[_Key]:
    for raw in client.scan_iter(match=match, count=1000):
        k = _parse(raw)
        if k is not None:
            yield k


def _lengths(client, names: list[bytes]) -> list[int]:
    """Bytes each key takes in the server (MEMORY USAGE: unlike a read, it leaves
    the key's idle time alone, which `gc --older-than` ages by)."""
    out: list[int] = []
    for i in range(0, len(names), 500):
        pipe = client.pipeline(transaction=False)
        for n in names[i : i + 500]:
            pipe.memory_usage(n, samples=0)
        out += [v if isinstance(v, int) else 0 for v in pipe.execute(raise_on_error=False)]
    return out


def inventory(client, namespace: str | None = None) -> dict[str, Any]:
    """What the remote holds under ``pcache:``, by format, namespace and host class:
    entries, chunks, leases and bytes; plus the server's memory settings."""
    groups: dict[tuple[str, str, str], dict[str, Any]] = {}
    keys = list(_scan(client, f"{ROOT}:*:{namespace}:*" if namespace else f"{ROOT}:*"))
    sizes = _lengths(client, [k.raw for k in keys])
    current = f"r{REMOTE_FORMAT}e{ENTRY_FORMAT}"
    for k, n in zip(keys, sizes, strict=True):
        g = groups.setdefault(
            (k.fmt, k.namespace, k.host),
            {
                "format": _printable(k.fmt),
                "current_format": k.fmt == current,
                "namespace": _printable(k.namespace),
                "host_class": _printable(k.host),
                "entries": 0,
                "chunks": 0,
                "leases": 0,
                "bytes": 0,
            },
        )
        g[{"e": "entries", "c": "chunks", "l": "leases"}[k.kind]] += 1
        g["bytes"] += n
    info = client.info("memory")
    evicted = client.info("stats").get("evicted_keys", 0)
    return {
        "groups": sorted(
            groups.values(), key=lambda g: (g["namespace"], g["format"], g["host_class"])
        ),
        "server": {
            "used_memory": info.get("used_memory", 0),
            "maxmemory": info.get("maxmemory", 0),
            "maxmemory_policy": info.get("maxmemory_policy", ""),
            "evicted_keys": evicted,
        },
    }


def _idle(client, names: list[bytes]) -> list[float | None]:
    """Seconds since each key was last read or written (None: unknown)."""
    out: list[float | None] = []
    for i in range(0, len(names), 500):
        pipe = client.pipeline(transaction=False)
        for n in names[i : i + 500]:
            pipe.object("idletime", n)
        got = pipe.execute(raise_on_error=False)
        out += [float(v) if isinstance(v, int) else None for v in got]
    return out


def gc(
    client,
    *,
    namespace: str | None = None,
    older_than: float | None = None,
    other_formats: bool = False,
    everything: bool = False,
    dry_run: bool = False,
) -> dict[str, Any]:
    """Remove entries (head and chunks) of ``namespace`` (every one if None) that
    nobody read for ``older_than`` seconds, or all of them (``everything``); every
    key of another format (``other_formats``); and chunks left without their head
    for over `ORPHAN_AGE`. Leases are never touched (they expire). Idle times are
    read before anything else, and nothing here reads an entry (which would make
    it young again). Where the server cannot tell idle times (an LFU policy), no
    entry is aged out: ``idle_unknown`` counts them. Returns counts."""
    current = f"r{REMOTE_FORMAT}e{ENTRY_FORMAT}"
    keys = [k for k in _scan(client, f"{ROOT}:*") if namespace in (None, k.namespace)]
    doomed: list[_Key] = []
    if other_formats:
        doomed += [k for k in keys if k.fmt != current and k.kind != "l"]
    mine = [k for k in keys if k.fmt == current]
    heads = [k for k in mine if k.kind == "e"]
    chunks = [k for k in mine if k.kind == "c"]
    head_idle = _idle(client, [h.raw for h in heads]) if older_than is not None else []
    chunk_idle = _idle(client, [c.raw for c in chunks])
    unknown = sum(1 for t in head_idle if t is None)
    if everything:
        old = heads
    elif older_than is not None:
        old = [
            h for h, t in zip(heads, head_idle, strict=True) if t is not None and t >= older_than
        ]
    else:
        old = []
    doomed += old

    def entry(k: _Key) -> tuple:
        return (k.fmt, k.namespace, k.host, k.digest)

    gone = {entry(h) for h in old}
    have_head = {entry(h) for h in heads} - gone
    ids: dict[tuple, set[str]] = {}
    head_ids: dict[tuple, str] = {}
    for c in chunks:
        ids.setdefault(entry(c), set()).add(c.id)
    for c, t in zip(chunks, chunk_idle, strict=True):
        e = entry(c)
        if e in gone:
            doomed.append(c)
        elif t is None or t < ORPHAN_AGE:
            continue  # perhaps a write under way
        elif e not in have_head:
            doomed.append(c)  # its head never came, or was evicted
        elif len(ids[e]) > 1:
            if e not in head_ids:
                head_ids[e] = _head_id(client, e)
            if head_ids[e] and c.id != head_ids[e]:
                doomed.append(c)  # a replaced writer's, or a race loser's
    doomed = list({k.raw: k for k in doomed}.values())
    sizes = _lengths(client, [k.raw for k in doomed])
    if not dry_run:
        for i in range(0, len(doomed), 500):
            client.delete(*[k.raw for k in doomed[i : i + 500]])
        if everything:
            for ns in {k.namespace for k in heads} | ({namespace} if namespace else set()):
                client.delete(_enc(f"{prefix_root(ns)}key-ids"))
    return {
        "entries_removed": sum(1 for k in doomed if k.kind == "e"),
        "chunks_removed": sum(1 for k in doomed if k.kind == "c"),
        "bytes_removed": sum(sizes),
        "entries_kept": len(heads) - len(old),
        "idle_unknown": unknown,
        "dry_run": dry_run,
    }


def _head_id(client, entry: tuple) -> str:
    """The writer id the current head of ``entry`` names (read, so made young:
    only for the rare digest with chunks of several writers)."""
    fmt, ns, host, digest = entry
    name = _enc(f"{ROOT}:{fmt}:{ns}:{host}:e:{digest}")
    try:
        text = client.getrange(name, 0, MAX_HEAD_BYTES).partition(b"\n")[2]
        return str(json.loads(text).get("id"))
    except Exception:
        return ""


def _printable(text: str) -> str:
    """A key name's part for a terminal: undecodable bytes and control characters
    escaped (a name can be anything a Redis writer chose)."""
    text = text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text[:200])


def prefix_root(namespace: str) -> str:
    return f"{ROOT}:r{REMOTE_FORMAT}e{ENTRY_FORMAT}:{namespace}:"


def read_fleet_key(path: str | None) -> bytes:
    """The fleet key from ``path``; `RemoteError` naming what is wrong."""
    if not path:
        raise RemoteError(
            "no fleet key: set JAX_PCACHE_REMOTE_SECRET_FILE to a file of at least 16 random "
            "bytes that only its owner may read (remote entries are signed with it)"
        )
    try:
        return read_key_file(path)
    except PcacheError as exc:
        raise RemoteError(f"JAX_PCACHE_REMOTE_SECRET_FILE: {exc}") from None


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
