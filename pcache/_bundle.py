"""Warm-cache bundles: entries moved between cache directories in one file.

A copied cache directory is useless elsewhere on purpose (its entries are signed
with that directory's secret). A bundle carries entries as data: ``export`` reads
and verifies each entry with the source directory's secret and writes it unsigned;
``import`` checks the bundle's integrity, skips what cannot load on this machine,
and stores the rest signed with the destination's secret. Importing is a trust
decision: an executable is machine code, and loading one can run anything, so
import only bundles you would run (``--verify-key`` accepts only bundles signed
with a key you hold). JAX is imported only by `probe_machine` (to list this
machine's devices); `pcache.cli` and `pcache._api` both call what is here.

The file::

    MAGIC (16 bytes)
    header: bundle format (u16), manifest length (u64), sha256 of the manifest,
            HMAC-SHA256 of the manifest with the signing key (zeros if unsigned)
    manifest (JSON, `schemas/bundle-manifest.schema.json`)
    values: each entry's executable, zstd-compressed, at the offset it lists

Every value's sha256 (compressed and raw) is in the manifest, whose own digest
is in the header, so one hash pass over the file proves it whole before anything
is stored: a truncated or edited bundle stores nothing.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import json
import os
import struct
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import IO, Any

import zstandard

from pcache._config import Layout
from pcache._errors import PcacheError
from pcache._signing import ENTRY_FORMAT, Signer, read_key_file

MAGIC = b"PCACHE-BUNDLE\r\n\x1a"  # 16 bytes; \r\n and ^Z catch text-mode copies
BUNDLE_FORMAT = 1
_HEADER = struct.Struct(">HQ32s32s")
_START = len(MAGIC) + _HEADER.size
#: Entry metadata that only the source directory's secret can vouch for: dropped.
_SOURCE_ONLY = ("hmac", "head_hmac", "format")
#: A manifest larger than this is refused before it is read (a bundle of 100,000
#: entries has a manifest of about 100 MB).
MAX_MANIFEST_BYTES = 256 << 20

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
    with another key, a newer format): nothing of it was stored."""


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
    signed: bool = False

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
) -> ExportResult:
    """Write the entries of ``store`` that ``select`` accepts (all, if None), and
    the working sets named in ``working_sets`` with the order of their keys (their
    entries are exported too, first), to the bundle ``path`` (atomically: a new
    file renamed into place). Each entry is read and checked with ``signer``;
    one that fails is left out and counted."""
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
    total = sum(e.raw_size for e in chosen)
    cctx = zstandard.ZstdCompressor(level=3, write_content_size=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w+b") as values:
            rows = []
            for e in chosen:
                raw = _read_checked(store, signer, e)
                if raw is None:
                    result.unreadable += 1
                    continue
                packed = cctx.compress(raw)
                rows.append(_manifest_row(e, raw, packed, values.tell()))
                values.write(packed)
                result.entries += 1
                result.raw_bytes += len(raw)
                if progress is not None:
                    progress("export", result.entries, len(chosen), result.raw_bytes, total)
            exported = {r["key"] for r in rows}
            manifest = {
                "bundle_format": BUNDLE_FORMAT,
                "entry_format": ENTRY_FORMAT,
                "created": time.time(),
                "entries": rows,
                "working_sets": [
                    {"name": s["name"], "keys": [k for k in s["keys"] if k in exported]}
                    for s in sets
                ],
            }
            result.working_sets = len(sets)
            _write_bundle(path, tmp, values, manifest, sign_key)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    result.bundle_bytes = path.stat().st_size
    return result


def _read_checked(store: Any, signer: Signer, e: Any) -> bytes | None:
    try:
        got = store.get_entry(
            e.key,
            touch=False,
            verify=False,  # the HMAC below covers every byte
            admit=lambda x: signer.admit(e.key, x.raw_size, x.extra),
        )
        if got is None:
            return None
        raw, entry = got
        signer.check(e.key, raw, entry.extra)
    except Exception:  # noqa: BLE001 - a damaged or foreign entry is left out, counted
        return None
    return raw


#: The entry metadata a bundle carries and an import stores (`Store.put`'s meta).
_META = ("function_name", "backend", "device_kind", "jax_version", "jaxlib_version",
         "compile_seconds")  # fmt: skip


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


def _write_bundle(path: Path, tmp: str, values: IO[bytes], manifest: dict, key) -> None:
    """Prepend magic, header and manifest to the values (in ``tmp``) and rename."""
    text = json.dumps(manifest, separators=(",", ":"), sort_keys=True).encode()
    tag = hmac.new(key, text, hashlib.sha256).digest() if key is not None else bytes(32)
    header = MAGIC + _HEADER.pack(BUNDLE_FORMAT, len(text), hashlib.sha256(text).digest(), tag)
    values.flush()
    values.seek(0)
    fd, out = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(header)
            f.write(text)
            while chunk := values.read(1 << 20):
                f.write(chunk)
            f.flush()
            os.fsync(f.fileno())
        os.replace(out, path)
    except BaseException:
        Path(out).unlink(missing_ok=True)
        raise
    finally:
        Path(tmp).unlink(missing_ok=True)


# ------------------------------------------------------------------------ import


def read_manifest(path: str | os.PathLike, verify_key: bytes | None = None) -> dict[str, Any]:
    """The bundle's manifest, after checking the header, the manifest's digest and
    (with ``verify_key``) its signature. Raises `BundleError`."""
    with open(path, "rb") as f:
        return _manifest(f, Path(path), verify_key).manifest


@dataclasses.dataclass(frozen=True)
class _Parsed:
    manifest: dict[str, Any]
    start: int  # where the values begin
    values_bytes: int
    signed: bool


def _manifest(f: IO[bytes], path: Path, verify_key: bytes | None) -> _Parsed:
    head = f.read(_START)
    if len(head) < len(MAGIC) or head[: len(MAGIC)] != MAGIC:
        raise BundleError(f"{path} is not a pcache bundle")
    if len(head) < _START:
        raise BundleError(f"{path} is truncated (in its header)")
    fmt, length, digest, tag = _HEADER.unpack(head[len(MAGIC) :])
    if fmt != BUNDLE_FORMAT:
        raise BundleError(
            f"{path} has bundle format {fmt}; this pcache reads format {BUNDLE_FORMAT}"
        )
    if length > MAX_MANIFEST_BYTES:
        raise BundleError(f"{path}: its manifest claims {length} bytes; refused")
    text = f.read(length)
    if len(text) != length:
        raise BundleError(f"{path} is truncated (in its manifest)")
    if not hmac.compare_digest(hashlib.sha256(text).digest(), digest):
        raise BundleError(f"{path}: its manifest does not match its digest (edited or damaged)")
    signed = tag != bytes(32)
    if verify_key is not None:
        want = hmac.new(verify_key, text, hashlib.sha256).digest()
        if not signed or not hmac.compare_digest(want, tag):
            raise BundleError(
                f"{path} is {'signed with another key' if signed else 'not signed'}; "
                "--verify-key accepts only bundles signed with that key"
            )
    try:
        manifest = json.loads(text)
        end = _check_manifest(manifest)
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise BundleError(f"{path}: malformed manifest ({exc})") from None
    return _Parsed(manifest, _START + length, end, signed)


def _check_manifest(m: Any) -> int:
    """Types and ranges of everything import acts on (the digest proves the bytes
    are the exporter's, not that the exporter was well-behaved)."""
    if not isinstance(m, dict) or m.get("bundle_format") != BUNDLE_FORMAT:
        raise ValueError("bundle_format")
    if not isinstance(m.get("entries"), list) or not isinstance(m.get("working_sets"), list):
        raise ValueError("entries / working_sets")
    end = 0
    for e in m["entries"]:
        for name in ("key", "sha256", "packed_sha256"):
            if not isinstance(e.get(name), str) or not e[name]:
                raise ValueError(f"entry {name}")
        for name in ("raw_size", "size", "offset"):
            if type(e.get(name)) is not int or e[name] < 0:
                raise ValueError(f"entry {name}")
        if e["offset"] != end:
            raise ValueError("entry offsets are not contiguous")
        end += e["size"]
        for name in ("function_name", "backend", "device_kind", "jax_version", "jaxlib_version"):
            if not isinstance(e.get(name, ""), str):
                raise ValueError(f"entry {name}")
        if not isinstance(e.get("compile_seconds", 0.0), (int, float)):
            raise ValueError("entry compile_seconds")
        if not isinstance(e.get("extra", {}), dict):
            raise ValueError("entry extra")
    for s in m["working_sets"]:
        if not isinstance(s.get("name"), str) or not isinstance(s.get("keys"), list):
            raise ValueError("working set")
        if not all(isinstance(k, str) for k in s["keys"]):
            raise ValueError("working set keys")
    return end


def read_bundle(
    store: Any,
    signer: Signer,
    path: str | os.PathLike,
    machine: Machine,
    *,
    verify_key: bytes | None = None,
    max_bytes: int | None = None,
    progress: Progress | None = None,
) -> ImportResult:
    """Store the entries of bundle ``path`` that can load on ``machine``, signed with
    ``signer`` (see the module's docstring). Raises `BundleError`, having stored
    nothing, for a bundle that is not whole; skips (and counts, by reason) entries
    for another machine, already present, or beyond ``max_bytes`` of stored values
    in all. Idempotent."""
    path = Path(path)
    with open(path, "rb") as f:
        parsed = _manifest(f, path, verify_key)
        manifest, start, total = parsed.manifest, parsed.start, parsed.values_bytes
        entries = manifest["entries"]
        result = ImportResult(str(path), entries=len(entries), signed=parsed.signed)
        # Pass 1: the whole file, hashed, before anything is stored.
        f.seek(0, os.SEEK_END)
        if f.tell() != start + total:
            raise BundleError(
                f"{path} is {'truncated' if f.tell() < start + total else 'longer than it says'}"
                f" ({f.tell()} bytes, its manifest says {start + total})"
            )
        f.seek(start)
        done = 0
        for i, e in enumerate(entries):
            packed = f.read(e["size"])
            if hashlib.sha256(packed).hexdigest() != e["packed_sha256"]:
                raise BundleError(f"{path}: entry {e['key'][:12]} does not match its digest")
            done += len(packed)
            if progress is not None:
                progress("verify", i + 1, len(entries), done, total)
        # Pass 2: store, entry by entry (each put is atomic).
        dctx = zstandard.ZstdDecompressor()
        used = _stored_bytes(store)
        done = 0
        for i, e in enumerate(entries):
            if progress is not None:
                progress("import", i + 1, len(entries), done, total)
            why = machine.why_not(e)
            if manifest.get("entry_format") != ENTRY_FORMAT:
                why = f"entry format {manifest.get('entry_format')!r} (here {ENTRY_FORMAT})"
            if why is not None:
                result.skip(f"not for this machine: {why}")
                continue
            if e["key"] in store:
                result.present += 1
                continue
            if max_bytes is not None and used + e["raw_size"] > max_bytes:
                result.skip("over the store's size limit")
                continue
            f.seek(start + e["offset"])
            packed = f.read(e["size"])
            raw = _inflate(dctx, packed, e["raw_size"])
            if raw is None or hashlib.sha256(raw).hexdigest() != e["sha256"]:
                raise BundleError(f"{path}: entry {e['key'][:12]} does not inflate to its digest")
            extra = signer.seal(e["key"], raw, dict(e.get("extra") or {}))
            meta = {name: e[name] for name in _META if name in e}
            store.put(e["key"], raw, meta={**meta, "extra": extra})
            used += len(raw)
            done += e["size"]
            result.imported += 1
            result.bytes_imported += len(raw)
    present = {e["key"] for e in entries if e["key"] in store}
    for s in manifest["working_sets"]:
        keys = [k for k in s["keys"] if k in present]
        if keys:
            # The order the exporting run used them in: a run of that program here
            # preloads them as if it had run before (merged ahead of any set here).
            old = [k for k in store.key_set(s["name"]) if k not in set(keys)]
            store.put_key_set(s["name"], keys + old)
            result.working_sets += 1
    return result


def _inflate(dctx: zstandard.ZstdDecompressor, packed: bytes, size: int) -> bytes | None:
    """Decompress to exactly ``size`` bytes, or None (never inflates past it)."""
    try:
        params = zstandard.get_frame_parameters(packed)
        if params.content_size != size:
            return None
        raw = dctx.decompress(packed, max_output_size=size)
    except zstandard.ZstdError:
        return None
    return raw if len(raw) == size else None


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


def _open(directory: Path, *, create: bool, max_bytes: int | None = None) -> Any:
    from pcache.store import Store

    if (directory / Layout.STORE_DB).exists():  # a bare store directory
        return Store(directory, max_bytes=max_bytes)
    inner = Layout(directory).store
    if not create and not (inner / Layout.STORE_DB).exists():
        raise BundleError(f"{directory} holds no pcache store; nothing has been cached there")
    return Store(inner, max_bytes=max_bytes)


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
    store = _open(directory, create=False)
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
        )
    finally:
        store.close()


def import_dir(
    directory: str | os.PathLike,
    path: str | os.PathLike,
    machine: Machine,
    *,
    verify_key: bytes | None = None,
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
            max_bytes=max_bytes,
            progress=progress,
        )
    finally:
        store.close()
