"""The bundle file format: its header, its manifest of records, and reading it bounded.

The file (bundle format 2)::

    MAGIC (16 bytes)
    header, big-endian: bundle format (u16), entry records (u32), working-set
            records (u32), manifest length (u64), sha256 of the manifest,
            HMAC-SHA256 with the signing key of b"pcache-bundle\\0", MAGIC and the
            header before it (32 zero bytes: unsigned)
    manifest: records, each a length (u32) and one JSON object of at most
            MAX_RECORD_BYTES nested at most MAX_DEPTH deep: the head, one per
            entry, then the working sets (`schemas/bundle-manifest.schema.json`)
    values: each entry's executable, zstd-compressed, at the offset it lists

Reading is bounded: no record is parsed before the whole manifest matched its
digest and the trust decision was made; each record's size and nesting are
checked on its bytes before `json.loads` (so neither memory nor recursion grows
with what a bundle claims); import keeps a few numbers per entry, not its
records; a value is inflated as a stream that stops at its signed size, after
its frame declared that size and the size was checked against the store's
limits. Nothing is stored before every record, and every byte of every value to
be stored, checked out; then every entry (and working set) is stored in one
transaction (`Store.put_many`): a failure or a crash while storing leaves none.

Format 1 (one JSON manifest, a signature over the manifest alone) is not read.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import hmac
import json
import math
import re
import struct
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

import zstandard

from pcache._errors import PcacheError

MAGIC = b"PCACHE-BUNDLE\r\n\x1a"  # 16 bytes; \r\n and ^Z catch text-mode copies
BUNDLE_FORMAT = 2
_HEADER = struct.Struct(">HIIQ32s32s")
_START = len(MAGIC) + _HEADER.size
_LENGTH = struct.Struct(">I")
_SIGNED_DOMAIN = b"pcache-bundle\0"
#: Entry metadata that only the source directory's secret can vouch for: not carried.
_SOURCE_ONLY = ("hmac", "head_hmac", "format")
#: A manifest larger than this is refused before it is read (a bundle of 100,000
#: entries has one of about 350 MB; import holds about 600 bytes per entry of it).
MAX_MANIFEST_BYTES = 1 << 30
#: One record (an entry's metadata, a head, a slice of a working set): at most this
#: many bytes (an entry's is about 3.5 KB) and this deep (an entry's is 4), checked
#: before it is parsed: a record costs at most ~25x its size while it is checked.
MAX_RECORD_BYTES = 1 << 20
MAX_DEPTH = 32
#: Keys per working-set record (a longer set spans consecutive records).
_SET_SLICE = 8192
#: The longest name, version or device kind an entry may carry.
MAX_STRING = 4096
_HEX64 = re.compile(r"[0-9a-f]{64}")
_CHUNK = 1 << 20
MAX_VALUE_SIZE = 4 << 30  # the store's default largest value (`Store.max_value_size`)
_FRAME_HEADER_MAX = 18  # ZSTD_FRAMEHEADERSIZE_MAX


class BundleError(PcacheError):
    """A bundle that cannot be used at all (not a bundle, truncated, edited, signed
    with another key or not signed, malformed, a newer format): nothing of it was
    stored."""


# ------------------------------------------------------------------------ records


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), sort_keys=True, allow_nan=False).encode()


#: A JSON string, or (failing that) a quote that starts none: matched in one pass,
#: so an unterminated string costs one scan to the end, not one per quote after it.
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|"', re.DOTALL)
_NOT_BRACKETS = bytes(c for c in range(256) if c not in b"[]{}")
#: A \uD800-\uDFFF escape that is not half of a pair (raw UTF-8 cannot encode one).
#: An escaped backslash before "uD800" text also matches: such a record is refused too.
_LONE_SURROGATE = re.compile(
    rb"\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F][0-9a-fA-F]{2})"
    rb"|(?<!\\u[dD][89abAB][0-9a-fA-F]{2})\\u[dD][c-fC-F][0-9a-fA-F]{2}"
)


def _constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number a bundle may carry")


def _loads(text: bytes) -> Any:
    """One record: its nesting checked on the bytes (strings removed, brackets
    counted), then parsed without NaN or Infinity. Raises ValueError."""
    if len(text) > MAX_RECORD_BYTES:
        raise ValueError(f"a record of {len(text)} bytes (at most {MAX_RECORD_BYTES})")
    parts, at = [], 0
    for m in _STRING.finditer(text):
        if m.end() - m.start() == 1:
            raise ValueError("an unterminated string")
        parts.append(text[at : m.start()])
        at = m.end()
    parts.append(text[at:])
    bare = b"".join(parts)
    del parts
    # Each pass removes the innermost level of brackets (every adjacent pair): a
    # record nested at most MAX_DEPTH deep has none left after that many passes.
    brackets = bare.translate(None, _NOT_BRACKETS)
    del bare
    for _ in range(MAX_DEPTH):
        if not brackets:
            break
        brackets = brackets.replace(b"[]", b"x").replace(b"{}", b"x").replace(b"x", b"")
    if brackets:
        raise ValueError(f"nested more than {MAX_DEPTH} deep (or unbalanced)")
    if _LONE_SURROGATE.search(text):  # SQLite and UTF-8 cannot hold one: refused here
        raise ValueError("not UTF-8 (a lone surrogate)")
    try:
        obj = json.loads(text.decode("utf-8"), parse_constant=_constant)
    except RecursionError:  # not reachable after the scan above; never a traceback
        raise ValueError("nested too deep") from None
    except UnicodeError as exc:
        raise ValueError(f"not UTF-8 ({exc.reason})") from None
    return obj


def _record(obj: Any, check: Callable[[Any], Any] | None = None) -> bytes | None:
    """``obj`` as a record, or None when import would refuse it (``check``: what
    import checks it with, besides its size and nesting)."""
    try:
        text = _dumps(obj)
        _loads(text)
        if check is not None:
            check(obj)
    except (ValueError, TypeError):
        return None
    return _LENGTH.pack(len(text)) + text


def _number(v: Any) -> bool:
    """A finite JSON number >= 0 that a float holds (a bool is no number here)."""
    if type(v) is int:
        return 0 <= v <= 2**53
    return type(v) is float and math.isfinite(v) and v >= 0


def _count(v: Any) -> bool:
    return type(v) is int and v >= 0


_STR_META = ("function_name", "backend", "device_kind", "jax_version", "jaxlib_version")
#: The entry metadata a bundle carries and an import stores (`Store.put`'s meta).
_META = (*_STR_META, "compile_seconds")
_ENTRY_FIELDS = frozenset(
    ("key", *_META, "raw_size", "size", "offset", "sha256", "packed_sha256", "extra")
)


@dataclasses.dataclass(frozen=True, slots=True)
class _Entry:
    """What import keeps of an entry record: its numbers and short strings (the
    extra is read again, from the record, when the entry is stored)."""

    key: str
    meta_values: tuple  # of _META, in order
    raw_size: int
    size: int
    offset: int
    sha256: str
    packed_sha256: str
    record_at: int  # where its record's text starts in the file
    record_len: int
    record_digest: bytes

    @property
    def meta(self) -> dict[str, Any]:
        return dict(zip(_META, self.meta_values, strict=True))


def _check_head(m: Any) -> dict[str, Any]:
    if not isinstance(m, dict) or set(m) != {"bundle_format", "entry_format", "created"}:
        raise ValueError(
            "the head record has other fields than bundle_format, entry_format, created"
        )
    if m["bundle_format"] != BUNDLE_FORMAT or type(m["bundle_format"]) is not int:
        raise ValueError(f"the head record says bundle format {m['bundle_format']!r}")
    if type(m["entry_format"]) is not int:
        raise ValueError("entry_format is not an integer")
    if not _number(m["created"]):
        raise ValueError("created is not a time")
    return m


def _check_entry(e: Any, n: int, offset: int, max_value_size: int) -> dict[str, Any]:
    """Types and ranges of everything import acts on (the digest proves the bytes
    are the exporter's, not that the exporter was well-behaved)."""
    where = f"entry {n}"
    if not isinstance(e, dict):
        raise ValueError(f"{where} is not an object")
    if set(e) != _ENTRY_FIELDS:
        odd = sorted(set(e) ^ _ENTRY_FIELDS)
        raise ValueError(f"{where} has other fields than an entry's ({', '.join(odd)[:200]})")
    for name in ("key", "sha256", "packed_sha256"):
        if not isinstance(e[name], str) or not _HEX64.fullmatch(e[name]):
            raise ValueError(f"{where}: {name} is not 64 hex digits")
    where = f"entry {e['key'][:12]}"
    for name in _STR_META:
        if not isinstance(e[name], str) or len(e[name]) > MAX_STRING:
            raise ValueError(f"{where}: {name} is not a string (of at most {MAX_STRING})")
    if not _number(e["compile_seconds"]):
        raise ValueError(f"{where}: compile_seconds is not a finite number >= 0")
    for name in ("raw_size", "size", "offset"):
        if not _count(e[name]):
            raise ValueError(f"{where}: {name} is not an integer >= 0")
    if e["offset"] != offset:
        raise ValueError(f"{where}: offsets are not contiguous")
    if e["raw_size"] > max_value_size or e["size"] > max_value_size:
        raise ValueError(
            f"{where} claims {max(e['raw_size'], e['size'])} bytes, more than one value "
            f"may have here ({max_value_size})"
        )
    extra = e["extra"]
    if not isinstance(extra, dict):
        raise ValueError(f"{where}: extra is not an object")
    if any(k in extra for k in _SOURCE_ONLY):
        raise ValueError(f"{where}: extra carries the exporting directory's signature fields")
    return e


def _check_set(s: Any) -> tuple[str, list[str]]:
    if not isinstance(s, dict) or set(s) != {"name", "keys"}:
        raise ValueError("a working-set record has other fields than name, keys")
    if not isinstance(s["name"], str) or not s["name"] or len(s["name"]) > MAX_STRING:
        raise ValueError("a working set's name is not a string")
    if not isinstance(s["keys"], list) or not all(isinstance(k, str) for k in s["keys"]):
        raise ValueError(f"working set {s['name'][:60]!r}: keys is not a list of keys")
    return s["name"], s["keys"]


# ------------------------------------------------------------------------ import


@dataclasses.dataclass(frozen=True)
class _Header:
    entries: int
    sets: int
    length: int
    digest: bytes
    tag: bytes
    signed_part: bytes  # what the tag is an HMAC of


def _header(f: IO[bytes], path: Path) -> _Header:
    head = f.read(_START)
    if len(head) < len(MAGIC) or head[: len(MAGIC)] != MAGIC:
        raise BundleError(f"{path} is not a pcache bundle")
    if len(head) >= len(MAGIC) + 2:
        (fmt,) = struct.unpack_from(">H", head, len(MAGIC))
        if fmt != BUNDLE_FORMAT:
            raise BundleError(
                f"{path} has bundle format {fmt}; this pcache reads format {BUNDLE_FORMAT}"
                + (" (export it again with this pcache)" if fmt < BUNDLE_FORMAT else "")
            )
    if len(head) < _START:
        raise BundleError(f"{path} is truncated (in its header)")
    _, entries, sets, length, digest, tag = _HEADER.unpack(head[len(MAGIC) :])
    if length > MAX_MANIFEST_BYTES:
        raise BundleError(f"{path}: its manifest claims {length} bytes; refused")
    # Every record is at least its length and "{}": the counts are bounded by the length.
    if (1 + entries + sets) * (_LENGTH.size + 2) > length:
        raise BundleError(f"{path}: its header claims more records than its manifest holds")
    return _Header(entries, sets, length, digest, tag, _SIGNED_DOMAIN + head[:-32])


def _hash_manifest(f: IO[bytes], path: Path, h: _Header) -> None:
    """The manifest's digest, read in chunks (none of it parsed or kept)."""
    f.seek(_START)
    d, left = hashlib.sha256(), h.length
    while left:
        chunk = f.read(min(left, _CHUNK))
        if not chunk:
            raise BundleError(f"{path} is truncated (in its manifest)")
        d.update(chunk)
        left -= len(chunk)
    if not hmac.compare_digest(d.digest(), h.digest):
        raise BundleError(f"{path}: its manifest does not match its digest (edited or damaged)")


def _trust(path: Path, h: _Header, verify_key: bytes | None, trust_unsigned: bool) -> bool:
    """True: signed with ``verify_key``; False: accepted unsigned as asked; else
    raises. A tag nobody checked counts for nothing."""
    tagged = h.tag != bytes(32)
    if verify_key is not None:
        want = hmac.new(verify_key, h.signed_part, hashlib.sha256).digest()
        if not tagged or not hmac.compare_digest(want, h.tag):
            raise BundleError(
                f"{path} is {'signed with another key' if tagged else 'not signed'}; "
                "--verify-key accepts only bundles signed with that key"
            )
        return True
    if trust_unsigned:
        return False
    raise BundleError(
        f"{path} is {'signed, but no key to check it was given' if tagged else 'not signed'}: "
        "nothing vouches that its executables are the programs it says (a bundle with "
        "swapped entries runs the wrong program). Pass --verify-key with the key it was "
        "signed with, or --trust-unsigned (Python: trust_unsigned=True) to trust whoever "
        "could have written this file"
    )


@dataclasses.dataclass
class _Parsed:
    head: dict[str, Any]
    entries: list[_Entry]
    sets: list[tuple[str, list[str]]]
    values_bytes: int


def _parse(
    f: IO[bytes], path: Path, h: _Header, max_value_size: int, keep: bool = False
) -> tuple[_Parsed, list[dict[str, Any]]]:
    """Every record, checked (bounded: see the module's docstring), hashed again
    (the file may have changed since `_hash_manifest`). ``keep``: the entry records
    too (for `read_manifest`)."""
    f.seek(_START)
    d, left, at = hashlib.sha256(), h.length, _START
    kept: list[dict[str, Any]] = []

    def record(what: str) -> tuple[Any, int, int, bytes]:
        nonlocal left, at
        if left < _LENGTH.size:
            raise ValueError(f"the manifest ends before {what}")
        raw_len = f.read(_LENGTH.size)
        if len(raw_len) < _LENGTH.size:
            raise ValueError(f"the manifest ends before {what}")
        (n,) = _LENGTH.unpack(raw_len)
        if n > MAX_RECORD_BYTES:
            raise ValueError(f"{what} is a record of {n} bytes (at most {MAX_RECORD_BYTES})")
        if n > left - _LENGTH.size:
            raise ValueError(f"{what} runs past the manifest")
        text = f.read(n)
        if len(text) != n:
            raise ValueError(f"the manifest ends in {what}")
        d.update(raw_len)
        d.update(text)
        left -= _LENGTH.size + n
        at += _LENGTH.size + n
        try:
            obj = _loads(text)
        except ValueError as exc:
            raise ValueError(f"{what}: {exc}") from None
        return obj, at - n, n, hashlib.sha256(text).digest()

    try:
        head = _check_head(record("the head")[0])
        entries: list[_Entry] = []
        seen: set[str] = set()
        end = 0
        for i in range(h.entries):
            obj, rec_at, rec_len, rec_digest = record(f"entry {i}")
            e = _check_entry(obj, i, end, max_value_size)
            if e["key"] in seen:
                raise ValueError(f"entry {e['key'][:12]} is in the bundle twice")
            seen.add(e["key"])
            end += e["size"]
            entries.append(
                _Entry(
                    e["key"],
                    tuple(e[name] for name in _META),
                    e["raw_size"],
                    e["size"],
                    e["offset"],
                    e["sha256"],
                    e["packed_sha256"],
                    rec_at,
                    rec_len,
                    rec_digest,
                )  # fmt: skip
            )
            if keep:
                kept.append(e)
            del obj, e  # one parsed record at a time: this one goes before the next is read
        sets: list[tuple[str, list[str]]] = []
        for _ in range(h.sets):
            name, keys = _check_set(record("a working set")[0])
            if any(k not in seen for k in keys):
                raise ValueError(f"working set {name[:60]!r} names a key not in the bundle")
            if sets and sets[-1][0] == name:
                sets[-1][1].extend(keys)
            else:
                sets.append((name, keys))
        if left:
            raise ValueError(f"{left} bytes after the last record")
    except ValueError as exc:
        raise BundleError(f"{path}: malformed manifest ({exc})") from None
    if not hmac.compare_digest(d.digest(), h.digest):
        raise BundleError(f"{path}: its manifest changed while it was read")
    return _Parsed(head, entries, sets, end), kept


@contextlib.contextmanager
def _open_bundle(path: Path) -> Iterator[IO[bytes]]:
    try:
        f = open(path, "rb")  # noqa: SIM115
    except OSError as exc:
        raise BundleError(f"cannot read {path}: {exc.strerror or exc}") from None
    with f:
        yield f


class _Window:
    """Reads at most ``size`` bytes of ``f`` from where it is, hashing them."""

    def __init__(self, f: IO[bytes], size: int) -> None:
        self.f, self.left, self.digest = f, size, hashlib.sha256()
        self.pending = b""

    def peek(self, n: int) -> bytes:
        self.pending = self._take(n)
        return self.pending

    def _take(self, n: int) -> bytes:
        data = self.f.read(min(n, self.left))
        self.left -= len(data)
        self.digest.update(data)
        return data

    def read(self, n: int = -1) -> bytes:
        if self.pending:
            data, self.pending = self.pending, b""
            return data
        return self._take(self.left if n < 0 else n)

    def drain(self) -> None:
        self.pending = b""
        while self.left and self._take(_CHUNK):
            pass


def _inflate(window: _Window, e: _Entry, keep: bool) -> bytes | str:
    """The entry's executable (``keep``; else b""), or what is wrong with it (its
    bytes not matching their digest first). Its frame must declare the signed
    size, and inflating stops past it."""
    got = _inflate_frame(window, e, keep)
    window.drain()
    if window.digest.hexdigest() != e.packed_sha256:
        return "its value does not match its digest"
    return got


def _inflate_frame(window: _Window, e: _Entry, keep: bool) -> bytes | str:
    try:
        params = zstandard.get_frame_parameters(window.peek(_FRAME_HEADER_MAX))
    except zstandard.ZstdError:
        return "its value is not a zstd frame"
    if params.content_size == zstandard.CONTENTSIZE_UNKNOWN:
        return "its value's frame declares no size"
    if params.content_size != e.raw_size:
        return f"its value's frame declares {params.content_size} bytes, not {e.raw_size}"
    parts, total, digest = [], 0, hashlib.sha256()
    try:
        reader = zstandard.ZstdDecompressor().stream_reader(
            window, read_size=1 << 17, read_across_frames=True, closefd=False
        )
        while chunk := reader.read(min(_CHUNK, e.raw_size - total + 1)):
            total += len(chunk)
            if total > e.raw_size:
                return f"its value inflates past {e.raw_size} bytes"
            digest.update(chunk)
            if keep:
                parts.append(chunk)
    except zstandard.ZstdError as exc:
        return f"its value does not inflate ({exc})"
    if total != e.raw_size or digest.hexdigest() != e.sha256:
        return "its value does not inflate to its digest"
    return b"".join(parts)
