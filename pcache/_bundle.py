"""Warm-cache bundles: entries moved between cache directories in one file.

A copied cache directory is useless elsewhere on purpose (its entries are signed
with that directory's secret). A bundle carries entries as data: ``export`` reads
and verifies each entry with the source directory's secret and writes it with
the digests of its value; ``import`` checks the bundle whole, skips what cannot
load on this machine, and stores the rest signed with the destination's secret.

Importing is a trust decision: an executable is machine code, loading one can run
anything, and a bundle says which program each executable is for (whoever wrote
the file could have swapped them). So an import needs either a valid signature
(``verify_key``: an HMAC, with a key you hold, of the header, which holds the
manifest's digest; the manifest holds every key with its value's digests) or an
explicit ``trust_unsigned``. A signature nobody checked counts for nothing. JAX is
imported only by `probe_machine` (to list this machine's devices); `pcache.cli`
and `pcache._api` both call what is here.

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
import os
import re
import struct
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO, Any

import zstandard

from pcache._config import Layout
from pcache._errors import PcacheError
from pcache._signing import ENTRY_FORMAT, Signer, read_key_file

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

__all__ = [
    "BUNDLE_FORMAT",
    "BundleError",
    "ExportResult",
    "ImportResult",
    "Machine",
    "export_dir",
    "import_dir",
    "probe_machine",
    "read_bundle",
    "read_key",
    "read_manifest",
    "write_bundle",
]


class BundleError(PcacheError):
    """A bundle that cannot be used at all (not a bundle, truncated, edited, signed
    with another key or not signed, malformed, a newer format): nothing of it was
    stored."""


@dataclasses.dataclass(frozen=True)
class Machine:
    """What an entry must match to load here. ``backends``: platform -> device
    kinds present; None: not probed (any backend and device kind is accepted:
    keys name them, so such an entry is never looked up, only stored)."""

    jax_version: str
    jaxlib_version: str
    backends: dict[str, frozenset[str]] | None = None

    def why_not(self, e: dict[str, Any]) -> str | None:
        if e.get("jax_version") and e["jax_version"] != self.jax_version:
            return f"jax {e['jax_version']} (here {self.jax_version})"
        if e.get("jaxlib_version") and e["jaxlib_version"] != self.jaxlib_version:
            return f"jaxlib {e['jaxlib_version']} (here {self.jaxlib_version})"
        if self.backends is not None and e.get("backend"):
            kinds = self.backends.get(e["backend"])
            if not kinds:
                return f"backend {e['backend']} (none here)"
            if e.get("device_kind") and e["device_kind"] not in kinds:
                return f"device kind {e['device_kind']} (here {', '.join(sorted(kinds))})"
        return None


@dataclasses.dataclass
class ExportResult:
    path: str
    entries: int = 0
    raw_bytes: int = 0
    bundle_bytes: int = 0
    working_sets: int = 0
    unreadable: int = 0  # entries of the source that failed their checks: left out
    evicted: int = 0  # listed, then gone before they were read (another process's gc)
    not_carried: int = 0  # metadata an import would refuse (over the limits): left out
    signed: bool = False

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass
class ImportResult:
    path: str
    entries: int = 0  # in the bundle
    imported: int = 0
    present: int = 0  # already stored here under the same key
    skipped: dict[str, int] = dataclasses.field(default_factory=dict)  # reason -> count
    bytes_imported: int = 0
    working_sets: int = 0
    signed: bool = False  # its signature was checked with the verify key
    trusted_unsigned: bool = False  # imported without a checked signature, as asked

    def skip(self, reason: str) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + 1

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


Progress = Callable[[str, int, int, int, int], None]  # (phase, done, total, bytes, total bytes)


def read_key(path: str | os.PathLike) -> bytes:
    """A signing key file: at least 16 bytes, readable by its owner only."""
    try:
        return read_key_file(path)
    except PcacheError as exc:
        raise BundleError(str(exc).replace("key file", "signing key", 1)) from exc.__cause__


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


# ------------------------------------------------------------------------ export


def write_bundle(
    store: Any,
    signer: Signer,
    path: str | os.PathLike,
    *,
    select: Callable[[Any], bool] | None = None,
    working_sets: Iterable[str] | None = None,
    sign_key: bytes | None = None,
    progress: Progress | None = None,
    damaged: Callable[[], int] | None = None,
) -> ExportResult:
    """Write the entries of ``store`` that ``select`` accepts (all, if None), and
    the working sets named in ``working_sets`` with the order of their keys (their
    entries are exported too, first), to the bundle ``path`` (atomically: a new
    file renamed into place). Each entry is read and checked with ``signer``: one
    that fails is left out and counted (``unreadable``); one gone since the listing
    (evicted by another process) is counted apart (``evicted``). ``damaged()``:
    how many entries the store has reported damaged so far (its ``report``), to
    tell an entry it removed as damaged from one evicted."""
    path = Path(path)
    sets = []
    wanted: dict[str, None] = {}
    for name in working_sets or ():
        keys = store.key_set(name)
        sets.append({"name": name, "keys": keys})
        wanted.update(dict.fromkeys(keys))
    by_key = {e.key: e for e in store.entries()}
    chosen = [by_key[k] for k in wanted if k in by_key]
    if select is not None:
        chosen += [e for e in by_key.values() if e.key not in wanted and select(e)]
    elif not sets:
        chosen = list(by_key.values())
    result = ExportResult(str(path), signed=sign_key is not None)
    max_value_size = getattr(store, "max_value_size", MAX_VALUE_SIZE)
    total = sum(e.raw_size for e in chosen)
    cctx = zstandard.ZstdCompressor(level=3, write_content_size=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    fd2, tmp2 = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w+b") as values, os.fdopen(fd2, "w+b") as records:
            manifest = hashlib.sha256()

            def put(rec: bytes) -> None:
                records.write(rec)
                manifest.update(rec)

            head = _dumps({"bundle_format": BUNDLE_FORMAT, "entry_format": ENTRY_FORMAT,
                           "created": time.time()})  # fmt: skip
            put(_LENGTH.pack(len(head)) + head)
            exported: set[str] = set()
            for i, e in enumerate(chosen):
                got = _read_checked(store, signer, e, damaged)
                if isinstance(got, str):
                    setattr(result, got, getattr(result, got) + 1)
                    continue
                packed = cctx.compress(got)
                row = _manifest_row(e, got, packed, values.tell())
                rec = _record(row, lambda r: _check_entry(r, 0, r["offset"], max_value_size))
                if rec is None:
                    result.not_carried += 1
                    continue
                put(rec)
                values.write(packed)
                exported.add(e.key)
                result.entries += 1
                result.raw_bytes += len(got)
                if progress is not None:
                    progress("export", i + 1, len(chosen), result.raw_bytes, total)
            n_sets, written = 0, set()
            for s in sets:
                keys = [k for k in s["keys"] if k in exported]
                for at in range(0, max(len(keys), 1), _SET_SLICE):
                    rec = _record({"name": s["name"], "keys": keys[at : at + _SET_SLICE]})
                    if rec is not None:  # None: a name too long to carry
                        put(rec)
                        n_sets += 1
                        written.add(s["name"])
            result.working_sets = len(written)
            header = MAGIC + _HEADER.pack(
                BUNDLE_FORMAT, result.entries, n_sets, records.tell(), manifest.digest(),
                bytes(32),
            )[:-32]  # fmt: skip
            tag = (
                hmac.new(sign_key, _SIGNED_DOMAIN + header, hashlib.sha256).digest()
                if sign_key is not None
                else bytes(32)
            )
            _write_bundle(path, header + tag, records, values)
    finally:
        Path(tmp).unlink(missing_ok=True)
        Path(tmp2).unlink(missing_ok=True)
    result.bundle_bytes = path.stat().st_size
    return result


def _read_checked(
    store: Any, signer: Signer, e: Any, damaged: Callable[[], int] | None
) -> bytes | str:
    """The entry's bytes, checked; or why not: "evicted" (gone since the listing),
    "unreadable" (it failed a check, or the store found it damaged)."""
    before = damaged() if damaged is not None else 0
    try:
        got = store.get_entry(
            e.key,
            touch=False,
            verify=False,  # the HMAC below covers every byte
            admit=lambda x: signer.admit(e.key, x.raw_size, x.extra),
        )
        if got is None:
            if damaged is not None and damaged() > before:
                return "unreadable"
            return "evicted" if e.key not in store else "unreadable"
        raw, entry = got
        signer.check(e.key, raw, entry.extra)
    except Exception:  # noqa: BLE001 - a damaged or foreign entry is left out, counted
        return "unreadable"
    return raw


def _manifest_row(e: Any, raw: bytes, packed: bytes, offset: int) -> dict[str, Any]:
    return {
        "key": e.key,
        **{name: getattr(e, name) for name in _META},
        "raw_size": len(raw),
        "size": len(packed),
        "offset": offset,
        "sha256": hashlib.sha256(raw).hexdigest(),
        "packed_sha256": hashlib.sha256(packed).hexdigest(),
        "extra": {k: v for k, v in e.extra.items() if k not in _SOURCE_ONLY},
    }


def _write_bundle(path: Path, header: bytes, records: IO[bytes], values: IO[bytes]) -> None:
    """Header, records and values into a new file renamed over ``path``."""
    fd, out = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(header)
            for part in (records, values):
                part.flush()
                part.seek(0)
                while chunk := part.read(_CHUNK):
                    f.write(chunk)
            f.flush()
            os.fsync(f.fileno())
        os.replace(out, path)
    except BaseException:
        Path(out).unlink(missing_ok=True)
        raise


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


def read_manifest(path: str | os.PathLike, verify_key: bytes | None = None) -> dict[str, Any]:
    """The bundle's manifest as one object (`schemas/bundle-manifest.schema.json`),
    after checking the header, the manifest's digest, (with ``verify_key``) its
    signature and every record. Raises `BundleError`. For inspection: it holds
    every entry's record."""
    path = Path(path)
    with _open_bundle(path) as f:
        h = _header(f, path)
        _hash_manifest(f, path, h)
        if verify_key is not None:
            _trust(path, h, verify_key, False)
        parsed, rows = _parse(f, path, h, MAX_VALUE_SIZE, keep=True)
    return {
        **parsed.head,
        "entries": rows,
        "working_sets": [{"name": n, "keys": k} for n, k in parsed.sets],
    }


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


def read_bundle(
    store: Any,
    signer: Signer,
    path: str | os.PathLike,
    machine: Machine | Callable[[], Machine],
    *,
    verify_key: bytes | None = None,
    trust_unsigned: bool = False,
    max_bytes: int | None = None,
    progress: Progress | None = None,
) -> ImportResult:
    """Store the entries of bundle ``path`` that can load on ``machine`` (or what a
    callable returns, called once the bundle passed its checks), signed with
    ``signer`` (see the module's docstring). Needs a signature checked with
    ``verify_key``, or ``trust_unsigned``. Raises `BundleError`, having stored
    nothing, for a bundle that is not whole, untrusted, or malformed; skips (and
    counts, by reason) entries for another machine, already present, or beyond
    ``max_bytes`` of stored values in all. Idempotent."""
    path = Path(path)
    max_value_size = getattr(store, "max_value_size", MAX_VALUE_SIZE)
    with _open_bundle(path) as f:
        h = _header(f, path)
        _hash_manifest(f, path, h)
        signed = _trust(path, h, verify_key, trust_unsigned)
        parsed, _ = _parse(f, path, h, max_value_size)
        entries, total = parsed.entries, parsed.values_bytes
        start = _START + h.length
        result = ImportResult(
            str(path), entries=len(entries), signed=signed, trusted_unsigned=not signed
        )
        size = f.seek(0, os.SEEK_END)
        if size != start + total:
            raise BundleError(
                f"{path} is {'truncated' if size < start + total else 'longer than it says'}"
                f" ({size} bytes, its manifest says {start + total})"
            )
        if callable(machine):
            machine = machine()
        # What would be stored: decided (from the metadata alone) before a value is read.
        plan: set[str] = set()
        used = _stored_bytes(store)
        for e in entries:
            why = machine.why_not(e.meta)
            if parsed.head["entry_format"] != ENTRY_FORMAT:
                why = f"entry format {parsed.head['entry_format']!r} (here {ENTRY_FORMAT})"
            if why is not None:
                result.skip(f"not for this machine: {why}")
            elif e.key in store:
                result.present += 1
            elif max_bytes is not None and used + e.raw_size > max_bytes:
                result.skip("over the store's size limit")
            else:
                plan.add(e.key)
                used += e.raw_size
        # Every value hashed; every one to be stored inflated (bounded) and checked.
        f.seek(start)
        done = 0
        for i, e in enumerate(entries):
            window = _Window(f, e.size)
            if e.key in plan:
                got = _inflate(window, e, keep=False)
                if isinstance(got, str):
                    raise BundleError(f"{path}: entry {e.key[:12]}: {got}")
            else:
                window.drain()
                if window.digest.hexdigest() != e.packed_sha256:
                    raise BundleError(f"{path}: entry {e.key[:12]} does not match its digest")
            done += e.size
            if progress is not None:
                progress("verify", i + 1, len(entries), done, total)
        # Then store, all in one transaction: a failure (the file changed since, a full
        # disk) or a crash leaves none of it.
        todo = [e for e in entries if e.key in plan]
        sets = _merged_sets(
            store, parsed.sets, {e.key for e in entries if e.key in plan or e.key in store}, result
        )
        store.put_many(
            _values(f, path, start, todo, signer, result, progress, total), key_sets=sets
        )
    return result


def _merged_sets(
    store: Any, records: list[tuple[str, list[str]]], present: set[str], result: ImportResult
) -> dict[str, list[str]]:
    """The working sets to store: each in the order the exporting run used its keys
    (those of the bundle's entries stored here), merged ahead of the set of that
    name here, so a run of that program preloads them as if it had run before."""
    sets: dict[str, list[str]] = {}
    for name, keys in records:
        keys = [k for k in dict.fromkeys(keys) if k in present]
        if keys:
            here = sets[name] if name in sets else store.key_set(name)
            sets[name] = keys + [k for k in here if k not in set(keys)]
            result.working_sets += 1
    return sets


def _values(
    f: IO[bytes],
    path: Path,
    start: int,
    todo: list[_Entry],
    signer: Signer,
    result: ImportResult,
    progress: Progress | None,
    total: int,
) -> Iterator[tuple[str, bytes, dict[str, Any]]]:
    """``(key, value, meta)`` of each entry to store, read again, inflated and sealed
    one at a time (as `Store.put_many` asks for them)."""
    done = 0
    for i, e in enumerate(todo):
        f.seek(start + e.offset)
        raw = _inflate(_Window(f, e.size), e, keep=True)
        f.seek(e.record_at)
        text = f.read(e.record_len)
        if isinstance(raw, str) or hashlib.sha256(text).digest() != e.record_digest:
            raise BundleError(f"{path} changed while it was imported")
        extra = signer.seal(e.key, raw, _loads(text)["extra"])
        yield e.key, raw, {**e.meta, "extra": extra}
        done += e.size
        result.imported += 1
        result.bytes_imported += len(raw)
        if progress is not None:
            progress("import", i + 1, len(todo), done, total)


def _stored_bytes(store: Any) -> int:
    return sum(e.raw_size for e in store.entries())


# --------------------------------------------------------- directories, this machine


def probe_machine(check_devices: bool = True) -> Machine:
    """This machine: the installed jax/jaxlib and (``check_devices``, which imports
    JAX and starts its backends) each backend's device kinds."""
    from importlib.metadata import version

    if not check_devices:
        return Machine(version("jax"), version("jaxlib"))
    import jax
    import jaxlib

    backends: dict[str, set[str]] = {}
    for d in jax.devices():
        backends.setdefault(d.platform, set()).add(d.device_kind)
    try:  # the CPU backend exists even where an accelerator is the default
        backends.setdefault("cpu", set()).update(d.device_kind for d in jax.devices("cpu"))
    except RuntimeError:
        pass
    return Machine(
        jax.__version__, jaxlib.__version__, {k: frozenset(v) for k, v in backends.items()}
    )


def _signer(directory: Path, *, create: bool) -> Signer:
    from pcache._signing import load_secret

    layout = Layout(directory)
    try:
        return Signer(load_secret(layout.secret, create=create), layout.secret)
    except FileNotFoundError:
        raise BundleError(
            f"{directory} has no {layout.secret.name}: its entries were never signed, so "
            "none can be vouched for in a bundle"
        ) from None


def _open(directory: Path, *, create: bool, max_bytes: int | None = None, **kw: Any) -> Any:
    from pcache.store import Store

    if (directory / Layout.STORE_DB).exists():  # a bare store directory
        return Store(directory, max_bytes=max_bytes, **kw)
    inner = Layout(directory).store
    if not create and not (inner / Layout.STORE_DB).exists():
        raise BundleError(f"{directory} holds no pcache store; nothing has been cached there")
    return Store(inner, max_bytes=max_bytes, **kw)


def export_dir(
    directory: str | os.PathLike,
    path: str | os.PathLike,
    *,
    working_sets: Iterable[str] = (),
    functions: Iterable[str] = (),
    backends: Iterable[str] = (),
    since: float | None = None,
    everything: bool = False,
    sign_key: bytes | None = None,
    progress: Progress | None = None,
) -> ExportResult:
    """Export from the cache ``directory``: the working sets whose program name
    contains any of ``working_sets`` (with their order), and the entries matching
    every other filter given (function name containing one of ``functions``, a
    backend in ``backends``, used within ``since`` seconds); everything when no
    filter is given (or ``everything``)."""
    directory = Path(directory)
    patterns, functions, backends = tuple(working_sets), tuple(functions), tuple(backends)
    signer = _signer(directory, create=False)
    damage: list[str] = []  # entries the store found damaged (and removed) while read
    store = _open(directory, create=False, report=lambda msg, *_: damage.append(msg))
    try:
        sets = [name for name, _, _ in store.key_sets() if any(p in name for p in patterns)]
        if patterns and not sets:
            raise BundleError(
                f"no working set in {directory} matches {', '.join(patterns)} "
                "('pcache stats' lists the programs that ran)"
            )
        now = time.time()
        filtered = bool(functions or backends or since is not None)

        def select(e: Any) -> bool:
            return (
                (not functions or any(f in e.function_name for f in functions))
                and (not backends or e.backend in backends)
                and (since is None or now - (e.last_used or e.created) <= since)
            )

        chosen = select if filtered or everything or not patterns else None
        return write_bundle(
            store,
            signer,
            path,
            select=chosen,
            working_sets=sets,
            sign_key=sign_key,
            progress=progress,
            damaged=damage.__len__,
        )
    finally:
        store.close()


def import_dir(
    directory: str | os.PathLike,
    path: str | os.PathLike,
    machine: Machine | Callable[[], Machine],
    *,
    verify_key: bytes | None = None,
    trust_unsigned: bool = False,
    max_bytes: int | None = None,
    progress: Progress | None = None,
) -> ImportResult:
    """Import into the cache ``directory`` (created as pcache would create it)."""
    directory = Path(directory)
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    signer = _signer(directory, create=True)
    store = _open(directory, create=True, max_bytes=max_bytes)
    try:
        return read_bundle(
            store,
            signer,
            path,
            machine,
            verify_key=verify_key,
            trust_unsigned=trust_unsigned,
            max_bytes=max_bytes,
            progress=progress,
        )
    finally:
        store.close()
