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

Format 1 (one JSON manifest, a signature over the manifest alone) is not read.

The file format, and how a bundle is read without trusting what it claims, are
in `pcache._bundle_format`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import os
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO, Any

import zstandard

from pcache._bundle_format import (
    _CHUNK,
    _HEADER,
    _LENGTH,
    _META,
    _SET_SLICE,
    _SIGNED_DOMAIN,
    _SOURCE_ONLY,
    _START,
    BUNDLE_FORMAT,
    MAGIC,
    MAX_DEPTH,
    MAX_VALUE_SIZE,
    BundleError,
    _check_entry,
    _dumps,
    _Entry,
    _hash_manifest,
    _header,
    _inflate,
    _loads,
    _open_bundle,
    _parse,
    _record,
    _trust,
    _Window,
)
from pcache._config import Layout
from pcache._errors import PcacheError
from pcache._signing import ENTRY_FORMAT, Signer, read_key_file

__all__ = [
    "BUNDLE_FORMAT",
    "BundleError",
    "ExportResult",
    "ImportResult",
    "MAGIC",
    "MAX_DEPTH",
    "Machine",
    "export_dir",
    "import_dir",
    "probe_machine",
    "read_bundle",
    "read_key",
    "read_manifest",
    "write_bundle",
]


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
    sets, chosen = _chosen(store, select, working_sets)
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
            n_sets = _put_sets(put, sets, exported, result)
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


def _chosen(
    store: Any, select: Callable[[Any], bool] | None, working_sets: Iterable[str] | None
) -> tuple[list[dict[str, Any]], list[Any]]:
    """The working sets to export (name, keys), and the entries: those of the sets
    first, in their order, then those ``select`` accepts (every one if neither)."""
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
    return sets, chosen


def _put_sets(
    put: Callable[[bytes], None],
    sets: list[dict[str, Any]],
    exported: set[str],
    result: ExportResult,
) -> int:
    """Write the working-set records (keys of exported entries only, in slices);
    return how many."""
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
    return n_sets


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
    """Store the entries of bundle ``path`` that can load on ``machine`` in ``store``
    (either, or what a callable returns, called once the bundle passed its
    checks), signed with
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
        if callable(store):  # opened only for a bundle that passed its checks
            store = store()
        plan = _plan(store, entries, parsed.head, machine, max_bytes, result)
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


def _plan(
    store: Any,
    entries: list[_Entry],
    head: dict[str, Any],
    machine: Machine,
    max_bytes: int | None,
    result: ImportResult,
) -> set[str]:
    """The keys to store: decided from the metadata alone, before a value is read;
    what is skipped is counted in ``result``."""
    plan: set[str] = set()
    used = _stored_bytes(store)
    for e in entries:
        why = machine.why_not(e.meta)
        if head["entry_format"] != ENTRY_FORMAT:
            why = f"entry format {head['entry_format']!r} (here {ENTRY_FORMAT})"
        if why is not None:
            result.skip(f"not for this machine: {why}")
        elif e.key in store:
            result.present += 1
        elif max_bytes is not None and used + e.raw_size > max_bytes:
            result.skip("over the store's size limit")
        else:
            plan.add(e.key)
            used += e.raw_size
    return plan


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
    opened: list[Any] = []

    def store() -> Any:  # not before the bundle passed its checks: a bad one touches nothing
        opened.append(_open(directory, create=True, max_bytes=max_bytes))
        return opened[0]

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
        for opened_store in opened:
            opened_store.close()
