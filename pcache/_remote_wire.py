"""The remote tier's format on the server: key names, heads, leases, scripts, settings.

JAX-free, like the rest of the remote tier (``pcache remote`` uses it). Keys, under
one prefix per format, namespace and key space (`pcache._remote.Remote.prefix_of`)::

    pcache:r<REMOTE_FORMAT>e<ENTRY_FORMAT>:<namespace>:<host class>.<key id>:
        e:<digest>           the entry: "<hmac hex>\\n<json>" (its `Head`), then,
                             when its zstd-compressed value fits in one chunk,
                             "\\n" and that value (one plain read serves a hit)
        c:<digest>:<id>:<i>  chunk i of a larger value (written first; ``id``
                             is the writer's, so a replaced entry never mixes
                             chunks of two writers)
        l:<digest>           the lease: a nonce and its HMAC, with an expiry

The host class is the executable's (`pcache._host`): a CPU program's names the CPU's
feature class, an accelerator program's its device kind and runtime versions.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import hmac
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from pcache._errors import PcacheError
from pcache._signing import ENTRY_FORMAT, read_key_file

#: What the keys and heads below mean; in the prefix, so formats never mix.
#: 2: a value that fits in one chunk is stored after its head, in the same key; the
#: head holds the sha256 of the compressed value (checked before inflating it).
REMOTE_FORMAT = 2
MAX_HEAD_BYTES = 1 << 20  # a head is a few KB; a longer one is never read whole
TAG_BYTES = 64  # a head starts with its HMAC (hex): what tells two heads apart
VOID = b"void"  # a lease given up by a host that will store nothing
VOID_SECONDS = 10.0
DEFAULT_CHUNK_BYTES = 1 << 20
CHUNK_BATCH = 64  # chunks read per command
#: A value stored with its head is at most this long (and one chunk long): a read
#: of an entry is at most MAX_HEAD_BYTES + 1 + INLINE_BYTES, whatever the key holds.
INLINE_BYTES = 1 << 20
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


def split_entry(blob: bytes) -> tuple[bytes, bytes, bytes]:
    """An entry key's value as ``(tag, head text, inline value)``: its JSON holds no
    raw newline, so the value (possibly empty) starts after the second."""
    tag, _, rest = blob.partition(b"\n")
    text, _, value = rest.partition(b"\n")
    return tag, text, value


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


@dataclasses.dataclass(frozen=True)
class Head:
    """What an entry's head says (all of it signed)."""

    digest: str
    id: str
    raw_size: int
    packed_size: int
    packed_sha256: str  # of the compressed value: checked before it is inflated
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
    name: str = ""  # the lease's key (in the key space of the program's host class)

    @property
    def held(self) -> bool:
        return self.outcome == "held"


Report = Callable[[str, str, BaseException | None], None]  # (what, cause, exception)


class _Down(Exception):
    """A command failed (already reported): the caller gives up quietly."""


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
