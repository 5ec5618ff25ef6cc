"""Warm-cache bundles (issue 16): `pcache export` in one directory, `pcache import`
into another with its own secret, programs in new processes start warm.

Programs run in real subprocesses (tests/fault_prog.py: ``JAX_PCACHE_DIR`` alone),
compile counts through `jax.monitoring`, results compared with stock JAX; bundles
are real files, edited and cut the way a bad copy or an attacker would.
"""

from __future__ import annotations

import hashlib
import hmac
import importlib.resources
import json
import os
import sqlite3
import struct
import subprocess
import sys
from pathlib import Path

import jax
import jsonschema
import pytest
import zstandard
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st
from pcache.store import Store

from pcache import _bundle
from pcache.cli import cli
from tests import zygote

ROOT = Path(__file__).resolve().parents[1]
PROG = ROOT / "tests" / "fault_prog.py"
N = 3


def run(cache: Path | None, n: int = N) -> dict:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("JAX_PCACHE_") or k == "JAX_PCACHE_CHECK"
    }
    if cache is not None:
        env["JAX_PCACHE_DIR"] = str(cache)
    proc = zygote.run([str(PROG), str(n)], env, ROOT, 240)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def pcache_cli(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False, prog_name="pcache")


def entries(cache: Path) -> dict[str, int]:
    with Store(cache / "store") as s:
        return {e.key: e.raw_size for e in s.entries()}


@pytest.fixture(scope="module")
def stock() -> dict:
    return run(None)


@pytest.fixture(scope="module")
def source(tmp_path_factory, stock) -> Path:
    cache = tmp_path_factory.mktemp("source") / "cache"
    cold = run(cache)
    assert cold["digest"] == stock["digest"] and cold["compiles"] == N
    return cache


@pytest.fixture(scope="module")
def bundle(tmp_path_factory, source) -> Path:
    path = tmp_path_factory.mktemp("bundle") / "warm.pcb"
    r = pcache_cli(
        "--dir", str(source), "export", str(path), "--working-set", "fault_prog", "--json"
    )
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert out["entries"] == N and out["working_sets"] == 1 and not out["signed"]
    return path


def test_an_imported_cache_starts_warm_in_a_new_process(tmp_path, source, bundle, stock):
    dest = tmp_path / "dest"
    r = pcache_cli("--dir", str(dest), "import", str(bundle), "--trust-unsigned", "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert (out["imported"], out["present"], out["skipped"]) == (N, 0, {})
    assert (out["signed"], out["trusted_unsigned"]) == (False, True)
    assert (dest / "secret.key").read_bytes() != (source / "secret.key").read_bytes()
    warm = run(dest)
    assert warm["digest"] == stock["digest"] and not warm["records"]
    assert (warm["compiles"], warm["lowerings"]) == (0, 0)
    # The working set came with its order: the run preloaded what it would use.
    assert warm["stats"]["preload_hits"] >= N - 1
    # Importing again changes nothing.
    before = entries(dest)
    again = pcache_cli("--dir", str(dest), "import", str(bundle), "--trust-unsigned", "--json")
    again = json.loads(again.output)
    assert (again["imported"], again["present"]) == (0, N)
    assert entries(dest) == before


def test_the_manifest_is_what_its_schema_says(bundle):
    manifest = _bundle.read_manifest(bundle)
    schema = json.loads(
        importlib.resources.files("pcache.store.schemas")
        .joinpath("bundle-manifest.schema.json")
        .read_text()
    )
    jsonschema.validate(manifest, schema)
    assert len(manifest["entries"]) == N
    assert manifest["working_sets"][0]["name"].startswith("script ")
    assert all("hmac" not in e["extra"] for e in manifest["entries"])


def _edited(bundle: Path, tmp_path: Path, edit) -> Path:
    data = bytearray(bundle.read_bytes())
    edit(data)
    out = tmp_path / "edited.pcb"
    out.write_bytes(bytes(data))
    return out


def _start(data: bytes) -> int:
    length = _bundle._HEADER.unpack_from(data, len(_bundle.MAGIC))[3]
    return _bundle._START + length


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda d: d.__setitem__(len(d) - 10, d[len(d) - 10] ^ 1), "does not match its digest"),
        (lambda d: d.__delitem__(slice(len(d) - 100, None)), "is truncated"),
        (lambda d: d.__delitem__(slice(120, None)), "is truncated (in its manifest)"),
        (lambda d: d.__delitem__(slice(40, None)), "is truncated (in its header)"),
        (lambda d: d.__setitem__(_start(d) - 5, d[_start(d) - 5] ^ 1), "does not match its digest"),
        (lambda d: d.__setitem__(0, ord("X")), "is not a pcache bundle"),
        (lambda d: d.extend(b"more"), "longer than it says"),
        (lambda d: d.__setitem__(slice(16, 18), struct.pack(">H", 9)), "bundle format 9"),
        (lambda d: d.__setitem__(slice(16, 18), struct.pack(">H", 1)), "export it again"),
    ],
    ids=[
        "value byte",
        "cut short",
        "cut in manifest",
        "cut in header",
        "manifest byte",
        "magic",
        "extended",
        "format",
        "format 1",
    ],
)
def test_a_damaged_bundle_is_refused_whole(tmp_path, bundle, edit, message):
    bad = _edited(bundle, tmp_path, edit)
    dest = tmp_path / "dest"
    r = pcache_cli("--dir", str(dest), "import", str(bad), "--trust-unsigned")
    assert r.exit_code == 1
    assert message in r.output and "nothing was imported" in r.output
    assert not (dest / "store" / "store.db").exists() or entries(dest) == {}


def _records(m: dict) -> list[bytes]:
    """The manifest ``m`` (one object, as `read_manifest` gives it) as the texts of
    its records, written here from the format's description (not by pcache)."""
    head = {k: m[k] for k in ("bundle_format", "entry_format", "created")}
    return [_text(head), *map(_text, m["entries"]), *map(_text, m["working_sets"])]


def _text(obj) -> bytes:
    return json.dumps(obj, separators=(",", ":"), sort_keys=True).encode()


def _pack(records: list[bytes], values: bytes, n_entries: int, key: bytes | None = None) -> bytes:
    """A bundle file of these record texts and values (HMAC with ``key``, or none)."""
    manifest = b"".join(struct.pack(">I", len(t)) + t for t in records)
    header = _bundle.MAGIC + struct.pack(
        ">HIIQ32s", 2, n_entries, len(records) - 1 - n_entries, len(manifest),
        hashlib.sha256(manifest).digest(),
    )  # fmt: skip
    tag = hmac.new(key, b"pcache-bundle\0" + header, "sha256").digest() if key else bytes(32)
    return header + tag + manifest + values


def _rewritten(bundle: Path, tmp_path: Path, change, name: str = "rewritten.pcb") -> Path:
    """The bundle an exporter elsewhere could have written: its manifest changed by
    ``change(manifest)`` (which may return new values) and its digest recomputed
    (unsigned). ``change`` may also return a list of record texts to write."""
    data = bundle.read_bytes()
    manifest = _bundle.read_manifest(bundle)
    values = data[_start(data) :]
    got = change(manifest)
    records = None
    if isinstance(got, tuple):
        got, records = got
    if isinstance(got, bytes):
        values = got
    out = tmp_path / name
    n = len(manifest["entries"])
    out.write_bytes(_pack(records or _records(manifest), values, n))
    return out


def test_entries_for_another_jax_or_device_are_skipped_and_counted(tmp_path, bundle, stock):
    def change(m):
        m["entries"][0]["jax_version"] = "0.0.1"
        m["entries"][1]["device_kind"] = "TPU v9"

    foreign = _rewritten(bundle, tmp_path, change)
    dest = tmp_path / "dest"
    r = pcache_cli("--dir", str(dest), "import", str(foreign), "--trust-unsigned", "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert out["imported"] == N - 2
    assert out["skipped"] == {
        f"not for this machine: jax 0.0.1 (here {jax.__version__})": 1,
        "not for this machine: device kind TPU v9 (here cpu)": 1,
    }
    assert len(entries(dest)) == N - 2
    warm = run(dest)
    assert warm["digest"] == stock["digest"] and warm["compiles"] == 2


def test_a_bundle_of_another_entry_format_stores_nothing(tmp_path, bundle):
    def change(m):
        m["entry_format"] = 99

    r = pcache_cli(
        "--dir", str(tmp_path / "dest"), "import", str(_rewritten(bundle, tmp_path, change)),
        "--trust-unsigned",
    )  # fmt: skip
    assert r.exit_code == 0 and f"Imported 0 of {N}" in r.output
    assert f"Skipped {N}: not for this machine: entry format 99" in r.output


def test_signed_bundles(tmp_path, source):
    key, other = tmp_path / "fleet.key", tmp_path / "other.key"
    for k in (key, other):
        k.write_bytes(os.urandom(32).hex().encode())
        k.chmod(0o600)
    signed = tmp_path / "signed.pcb"
    r = pcache_cli("--dir", str(source), "export", str(signed), "--sign-key", str(key))
    assert r.exit_code == 0 and "signed" in r.output
    ok = pcache_cli("--dir", str(tmp_path / "a"), "import", str(signed), "--verify-key", str(key))
    assert ok.exit_code == 0 and f"Imported {N} of {N}" in ok.output
    bad = pcache_cli(
        "--dir", str(tmp_path / "b"), "import", str(signed), "--verify-key", str(other)
    )
    assert bad.exit_code == 1 and "signed with another key" in bad.output
    unsigned = tmp_path / "unsigned.pcb"
    pcache_cli("--dir", str(source), "export", str(unsigned))
    r = pcache_cli("--dir", str(tmp_path / "c"), "import", str(unsigned), "--verify-key", str(key))
    assert r.exit_code == 1 and "not signed" in r.output
    key.chmod(0o644)
    r = pcache_cli("--dir", str(source), "export", str(tmp_path / "x.pcb"), "--sign-key", str(key))
    assert r.exit_code == 1 and "readable by others" in r.output


def test_import_stays_within_the_size_limit(tmp_path, bundle):
    dest = tmp_path / "dest"
    smallest = min(e["raw_size"] for e in _bundle.read_manifest(bundle)["entries"])
    r = pcache_cli(
        "--dir", str(dest), "import", str(bundle), "--max-size", str(smallest), "--json",
        "--trust-unsigned",
    )  # fmt: skip
    out = json.loads(r.output)
    assert out["imported"] == 1 and out["skipped"] == {"over the store's size limit": N - 1}


def test_export_filters(tmp_path, source):
    none = tmp_path / "none.pcb"
    r = pcache_cli("--dir", str(source), "export", str(none), "--function", "no-such-fn", "--json")
    assert json.loads(r.output)["entries"] == 0
    r = pcache_cli("--dir", str(source), "export", str(none), "--backend", "cpu", "--json")
    assert json.loads(r.output)["entries"] == N
    r = pcache_cli("--dir", str(source), "export", str(none), "--working-set", "nothing-ran")
    assert r.exit_code == 1 and "no working set" in r.output


def test_the_python_api_moves_a_warm_cache(tmp_path, source, stock):
    import pcache

    path = tmp_path / "api.pcb"
    out = pcache.export_bundle(path, directory=source, functions=["lambda"])
    assert out["entries"] == N
    with pytest.raises(pcache.BundleError, match="is not signed"):
        pcache.import_bundle(path, directory=tmp_path / "dest", device_check=False)
    assert entries(tmp_path / "dest") == {}
    got = pcache.import_bundle(
        path, directory=tmp_path / "dest", device_check=False, trust_unsigned=True
    )
    assert got["imported"] == N
    with pytest.raises(pcache.BundleError, match="not a pcache bundle"):
        pcache.import_bundle(source / "secret.key", directory=tmp_path / "dest")
    assert run(tmp_path / "dest")["compiles"] == 0


# -- hostile bundles (issue 26): refused whole, one line, nothing stored, bounded memory --

# The real CLI in a child process that reports its peak RSS (KiB) on stderr at exit:
# VmHWM, the peak of this process's own memory (getrusage's ru_maxrss outlives exec
# and would report the forking pytest's size).
_CHILD = (
    "import atexit, os, resource, sys\n"
    "if os.environ.get('LIMIT_AS'):\n"
    "    n = int(os.environ['LIMIT_AS']); resource.setrlimit(resource.RLIMIT_AS, (n, n))\n"
    "def peak():\n"
    "    for line in open('/proc/self/status'):\n"
    "        if line.startswith('VmHWM:'):\n"
    "            print('MAXRSS_KB', line.split()[1], file=sys.stderr)\n"
    "atexit.register(peak)\n"
    "from pcache.cli import cli\n"
    "cli(prog_name='pcache')\n"
)


def child_cli(*args: str, limit_as: int | None = None) -> tuple[int, str, str, int]:
    """``pcache ARGS`` in a subprocess: exit code, stdout, stderr (without the RSS
    line) and peak RSS in KiB. ``limit_as``: its address-space limit, bytes."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("JAX_PCACHE_")}
    if limit_as is not None:
        env["LIMIT_AS"] = str(limit_as)
    proc = zygote.run(["-c", _CHILD, *args], env, ROOT, 240)
    lines = proc.stderr.splitlines()
    rss = [int(x.split()[1]) for x in lines if x.startswith("MAXRSS_KB ")]
    err = "\n".join(x for x in lines if not x.startswith("MAXRSS_KB "))
    return proc.returncode, proc.stdout, err, rss[0] if rss else 0


def stored_rows(cache: Path) -> int:
    """Entries in the real SQLite file (0 if there is none)."""
    db = cache / "store" / "store.db"
    if not db.exists():
        return 0
    con = sqlite3.connect(db)
    try:
        return con.execute("SELECT count(*) FROM entries").fetchone()[0]
    finally:
        con.close()


def assert_refused(cache: Path, rc: int, out: str, err: str, message: str) -> None:
    assert rc == 1, (out, err)
    assert "Traceback" not in err and "Error" not in out, err
    assert err.count("\n") == 0 and err.startswith("Error: "), err  # one line
    assert message in err and "nothing was imported" in err, err
    assert stored_rows(cache) == 0


def import_args(cache: Path, path: Path, *more: str) -> list[str]:
    return ["--dir", str(cache), "import", str(path), "--no-device-check", *more]


@pytest.fixture(scope="module")
def honest_rss(tmp_path_factory, bundle) -> int:
    """Peak RSS (KiB) of the CLI importing the honest bundle, as the hostile cases run it."""
    dest = tmp_path_factory.mktemp("honest") / "cache"
    rc, out, err, rss = child_cli(*import_args(dest, bundle, "--trust-unsigned"))
    assert rc == 0 and f"Imported {N} of {N}" in out, err
    assert stored_rows(dest) == N and rss > 0
    return rss


MB = 1024  # KiB


def _manifest_with(bundle: Path, records_for) -> tuple[list[bytes], int]:
    m = _bundle.read_manifest(bundle)
    return records_for(m, _records(m)), len(m["entries"])


def _nested(m, recs):  # the first entry's record: 200,000 nested [
    return [recs[0], b"[" * 200_000, *recs[2:]]


def _nested_in_extra(m, recs):  # deeper than the format allows, inside a valid entry
    e = dict(m["entries"][0], extra={"x": json.loads("[" * 40 + "]" * 40)})
    return [recs[0], _text(e), *recs[2:]]


def _huge_record(m, recs):  # one 16 MB record of empty lists
    return [recs[0], b"[" + b"[]," * ((16 << 20) // 3) + b"[]]", *recs[2:]]


def _many_big_records(m, recs):
    """16 MB of manifest that passes every bound until its last record: 15 entries
    of ~1 MiB of empty lists each (the most a record may cost to parse), then one
    with compile_seconds -1."""
    filler = b"[" + b"[]," * ((1 << 20) // 3 - 2000) + b"[]]"
    rows = []
    for i in range(16):
        e = dict(m["entries"][0], key=f"{i:02x}" * 32, raw_size=0, size=0, offset=0)
        if i == 15:
            e["compile_seconds"] = -1
        rows.append(_text(e).replace(b'"extra":{', b'"extra":{"x":' + filler + b",", 1))
    return [recs[0], *rows]


@pytest.mark.parametrize(
    "records_for, message",
    [
        (_nested, "nested more than 32 deep"),
        (_nested_in_extra, "nested more than 32 deep"),
        (_huge_record, "a record of 16777219 bytes"),
        (_many_big_records, "entry 0f0f0f0f0f0f: compile_seconds is not"),
    ],
    ids=["200k nested [", "nested in extra", "16 MB record", "16 MB of 1 MiB records"],
)
def test_a_hostile_manifest_is_refused_in_bounded_memory(
    tmp_path, bundle, honest_rss, records_for, message
):
    records, n = _manifest_with(bundle, records_for)
    if records_for is _many_big_records:
        n = 16
    data = bundle.read_bytes()
    bad = tmp_path / "bad.pcb"
    bad.write_bytes(_pack(records, data[_start(data) :] if n == N else b"", n))
    dest = tmp_path / "dest"
    rc, out, err, rss = child_cli(*import_args(dest, bad, "--trust-unsigned"))
    assert_refused(dest, rc, out, err, message)
    assert rss < honest_rss + 50 * MB, (rss, honest_rss)


def _rle_frame(declared: int | None, actual: int) -> bytes:
    """A zstd frame of ``actual`` zero bytes in RLE blocks (4 bytes per 128 KiB),
    declaring ``declared`` bytes of content (None: no size declared)."""
    if declared is None:  # a window descriptor instead of a content size: 2^27 bytes
        out = bytearray(struct.pack("<IB", 0xFD2FB528, 0x00)) + bytes([(27 - 10) << 3])
    else:
        out = bytearray(struct.pack("<IBQ", 0xFD2FB528, 0xE0, declared))
    left = actual
    while left:
        n = min(left, 1 << 17)
        left -= n
        out += ((left == 0) | (1 << 1) | (n << 3)).to_bytes(3, "little") + b"\0"
    return bytes(out)


_BIG = 4 * 2**30 + 2**29  # 4.5 GiB: past the store's 4 GiB largest value


@pytest.mark.parametrize(
    "raw_size, frame, message",
    [
        (_BIG, _rle_frame(_BIG, _BIG), "more than one value may have here"),
        (1 << 20, _rle_frame(_BIG, _BIG), f"frame declares {_BIG} bytes, not {1 << 20}"),
        (1 << 20, _rle_frame(None, _BIG), "frame declares no size"),
        (1 << 20, _rle_frame(1 << 20, _BIG), "its value"),
    ],
    ids=["claims 4.5 GiB", "frame declares 4.5 GiB", "frame declares nothing", "frame lies"],
)
def test_an_oversized_entry_is_refused_before_it_inflates(
    tmp_path, bundle, honest_rss, raw_size, frame, message
):
    zeros = hashlib.sha256(bytes(min(raw_size, 1 << 20))).hexdigest()

    def change(m):
        first, rest = m["entries"][0], m["entries"][1:]
        first.update(
            raw_size=raw_size, size=len(frame), sha256=zeros,
            packed_sha256=hashlib.sha256(frame).hexdigest(),
        )  # fmt: skip
        data = bundle.read_bytes()
        old = data[_start(data) + rest[0]["offset"] :]
        off = len(frame)
        for e in rest:
            e["offset"] = off
            off += e["size"]
        return frame + old

    bad = _rewritten(bundle, tmp_path, change)
    dest = tmp_path / "dest"
    rc, out, err, rss = child_cli(*import_args(dest, bad, "--trust-unsigned"), limit_as=3 << 29)
    assert_refused(dest, rc, out, err, message)
    assert rss < honest_rss + 50 * MB, (rss, honest_rss)


def _last(**fields):
    def change(m):
        m["entries"][-1].update(fields)

    return change


def _last_text(old: bytes, new: bytes):
    """Edit the last entry's record text (for what json.dumps will not write)."""

    def change(m):
        recs = _records(m)
        i = len(m["entries"])
        assert old in recs[i]
        recs[i] = recs[i].replace(old, new, 1)
        return None, recs

    return change


@pytest.mark.parametrize(
    "change, message",
    [
        (_last(compile_seconds=-1), "compile_seconds is not a finite number >= 0"),
        (_last(compile_seconds=True), "compile_seconds is not a finite number >= 0"),
        (_last(compile_seconds=10**400), "compile_seconds is not a finite number >= 0"),
        (_last_text(b'"compile_seconds":', b'"compile_seconds":NaN,"_":'), "NaN is not a number"),
        (_last_text(b'"extra":{', b'"extra":{"x":Infinity,'), "Infinity is not a number"),
        (_last_text(b'"extra":{', b'"extra":{"x":NaN,'), "NaN is not a number"),
        (_last(raw_size=True), "raw_size is not an integer >= 0"),
        (_last(size="12"), "size is not an integer >= 0"),
        (_last(offset=0), "offsets are not contiguous"),
        (_last(key="../../etc"), "key is not 64 hex digits"),
        (_last(function_name=7), "function_name is not a string"),
        (_last(function_name="f" * 5000), "function_name is not a string"),
        (_last(extra=[]), "extra is not an object"),
        (_last(extra={"hmac": "0" * 64}), "signature fields"),
        (_last(surprise=1), "other fields than an entry's"),
        (_last_text(b'"function_name":"', b'"function_name":"\\ud800'), "not UTF-8"),
        (_last_text(b'"extra":{', b'"extra":{"x":"' + b'\\"' * 400_000), "unterminated string"),
    ],
    ids=[
        "negative seconds", "bool seconds", "huge seconds", "NaN seconds",
        "Infinity in extra", "NaN in extra", "bool size", "string size", "offset",
        "key", "int name", "long name", "list extra", "hmac in extra", "unknown field",
        "lone surrogate", "unterminated string",
    ],
)  # fmt: skip
def test_bad_metadata_in_the_last_entry_stores_nothing(tmp_path, bundle, change, message):
    bad = _rewritten(bundle, tmp_path, change)
    dest = tmp_path / "dest"
    rc, out, err, _ = child_cli(*import_args(dest, bad, "--trust-unsigned"))
    assert_refused(dest, rc, out, err, message)


def test_a_key_twice_stores_nothing(tmp_path, bundle):
    bad = _rewritten(
        bundle, tmp_path, _last(key=_bundle.read_manifest(bundle)["entries"][0]["key"])
    )
    dest = tmp_path / "dest"
    rc, out, err, _ = child_cli(*import_args(dest, bad, "--trust-unsigned"))
    assert_refused(dest, rc, out, err, "is in the bundle twice")


def _last_value(frame_of, data: bytes):
    """Replace the last entry's value by ``frame_of(raw)`` (digests recomputed to
    match the new frame: only its size, or its content, lies)."""

    def change(m):
        values = data[_start(data) :]
        last = m["entries"][-1]
        raw = zstandard.ZstdDecompressor().decompress(values[last["offset"] :])
        frame, content = frame_of(raw)
        last.update(
            size=len(frame), packed_sha256=hashlib.sha256(frame).hexdigest(),
            sha256=hashlib.sha256(content).hexdigest(),
        )  # fmt: skip
        return values[: last["offset"]] + frame

    return change


@pytest.mark.parametrize(
    "frame_of, message",
    [
        (lambda raw: (zstandard.compress(raw[:-1]), raw[:-1]), "frame declares"),
        (
            lambda raw: (zstandard.ZstdCompressor(write_content_size=False).compress(raw), raw),
            "frame declares no size",
        ),
        (lambda raw: (zstandard.compress(raw[::-1]), raw), "does not inflate to its digest"),
        (lambda raw: (zstandard.compress(raw) + b"junk", raw), "does not inflate"),
        (lambda raw: (b"not zstd at all", raw), "is not a zstd frame"),
    ],
    ids=["one byte short", "no size", "other content", "trailing junk", "not zstd"],
)
def test_a_value_that_does_not_match_its_size_stores_nothing(tmp_path, bundle, frame_of, message):
    bad = _rewritten(bundle, tmp_path, _last_value(frame_of, bundle.read_bytes()))
    dest = tmp_path / "dest"
    rc, out, err, _ = child_cli(*import_args(dest, bad, "--trust-unsigned"))
    assert_refused(dest, rc, out, err, message)


def test_an_unsigned_bundle_needs_the_explicit_flag(tmp_path, bundle, source):
    """Entries swapped (program 1's key on program 0's executable) make a bundle
    as whole as any: only a checked signature or the user's say-so imports it."""

    def swap(m):
        a, b = m["entries"][0], m["entries"][1]
        a["key"], b["key"] = b["key"], a["key"]

    swapped = _rewritten(bundle, tmp_path, swap)
    dest = tmp_path / "dest"
    rc, out, err, _ = child_cli(*import_args(dest, swapped))
    assert_refused(dest, rc, out, err, "is not signed")
    assert "--trust-unsigned" in err and "--verify-key" in err
    # A tag nobody checks is no signature: a forged one changes nothing.
    data = bytearray(swapped.read_bytes())
    data[_bundle._START - 32 : _bundle._START] = os.urandom(32)
    forged = tmp_path / "forged.pcb"
    forged.write_bytes(bytes(data))
    rc, out, err, _ = child_cli(*import_args(dest, forged))
    assert_refused(dest, rc, out, err, "is signed, but no key to check it was given")
    key = tmp_path / "k.key"
    key.write_bytes(os.urandom(32).hex().encode())
    key.chmod(0o600)
    rc, out, err, _ = child_cli(*import_args(dest, forged, "--verify-key", str(key)))
    assert_refused(dest, rc, out, err, "signed with another key")
    # A signed bundle whose entries were swapped after signing fails its signature.
    signed = tmp_path / "signed.pcb"
    r = pcache_cli("--dir", str(source), "export", str(signed), "--sign-key", str(key))
    assert r.exit_code == 0, r.output
    data = signed.read_bytes()
    tag = data[_bundle._START - 32 : _bundle._START]
    resigned = _rewritten(signed, tmp_path, swap, name="swapped-signed.pcb")
    data = bytearray(resigned.read_bytes())
    data[_bundle._START - 32 : _bundle._START] = tag
    resigned.write_bytes(bytes(data))
    rc, out, err, _ = child_cli(*import_args(dest, resigned, "--verify-key", str(key)))
    assert_refused(dest, rc, out, err, "signed with another key")
    rc, out, err, _ = child_cli(*import_args(dest, signed, "--verify-key", str(key), "--json"))
    assert rc == 0 and json.loads(out)["signed"] and stored_rows(dest) == N, err
    # The explicit flag is what imports the unsigned one, and says so.
    other = tmp_path / "other"
    rc, out, err, _ = child_cli(*import_args(other, swapped, "--trust-unsigned", "--json"))
    assert rc == 0 and json.loads(out)["trusted_unsigned"] and stored_rows(other) == N, err


def test_export_tells_evicted_entries_from_failed_ones(tmp_path, source, monkeypatch):
    """Another process evicts an entry while the export runs; a third entry fails
    its HMAC. The export counts and says each apart."""
    import shutil

    import pcache.cli

    cache = tmp_path / "cache"
    shutil.copytree(source, cache)
    with Store(cache / "store") as s:
        order = [e.key for e in s.entries()]
    assert len(order) == N
    con = sqlite3.connect(cache / "store" / "store.db")
    (extra,) = con.execute("SELECT extra FROM entries WHERE key = ?", (order[1],)).fetchone()
    forged = dict(json.loads(extra), hmac="0" * 64)
    con.execute("UPDATE entries SET extra = ? WHERE key = ?", (json.dumps(forged), order[1]))
    con.commit()
    con.close()
    evict = (
        "import sys; from pcache.store import Store\n"
        "s = Store(sys.argv[1]); assert s.delete(sys.argv[2]); s.close()"
    )

    evicted = []

    def progress(phase, done, total, nbytes, total_bytes):
        if done == 1 and not evicted:  # the first entry is in; another process evicts
            evicted.append(order[2])  # the last
            subprocess.run(
                [sys.executable, "-c", evict, str(cache / "store"), order[2]], check=True
            )

    monkeypatch.setattr(pcache.cli, "_progress", lambda enabled: progress)
    out = tmp_path / "out.pcb"
    r = pcache_cli("--dir", str(cache), "export", str(out), "--all")
    assert r.exit_code == 0, r.output
    assert "Left out 1 entries that failed their checks here." in r.output
    assert "Left out 1 entries evicted (by another process)" in r.output
    r = pcache_cli("--dir", str(cache), "export", str(out), "--all", "--json")
    got = json.loads(r.output)
    # The evicted entry is no longer listed; the forged one still fails.
    assert (got["entries"], got["unreadable"], got["evicted"]) == (1, 1, 0)


def test_export_and_import_never_show_a_traceback(tmp_path, source):
    """Whatever the file: exit 1 or 2 and a one-line message."""
    dest = tmp_path / "dest"
    junk = tmp_path / "junk.pcb"
    for data in (b"", _bundle.MAGIC, _bundle.MAGIC + os.urandom(4096), os.urandom(100)):
        junk.write_bytes(data)
        rc, out, err, _ = child_cli(*import_args(dest, junk, "--trust-unsigned"))
        assert_refused(dest, rc, out, err, "")
    rc, out, err, _ = child_cli(*import_args(dest, tmp_path))  # a directory
    assert rc == 2 and "Traceback" not in err
    rc, out, err, _ = child_cli("--dir", str(source), "export", str(tmp_path / "no" / "x.pcb"))
    assert "Traceback" not in err
    rc, out, err, _ = child_cli("--dir", str(source), "export", "/proc/version")
    assert rc == 1 and "Traceback" not in err and err.startswith("Error: "), err


def test_a_bundle_that_changes_while_it_is_stored_leaves_nothing(tmp_path, bundle):
    """Every value is checked, then the file is edited in place (the last value's
    bytes) before the entries are stored: the import stops at that entry and
    removes the ones it stored before it."""
    path = tmp_path / "changing.pcb"
    path.write_bytes(bundle.read_bytes())
    dest = tmp_path / "dest"

    def progress(phase, done, total, nbytes, total_bytes):
        if phase == "verify" and done == total:
            with open(path, "r+b") as f:
                f.seek(-10, os.SEEK_END)
                byte = f.read(1)
                f.seek(-10, os.SEEK_END)
                f.write(bytes([byte[0] ^ 1]))

    stored = []

    def import_progress(phase, done, total, nbytes, total_bytes):
        progress(phase, done, total, nbytes, total_bytes)
        if phase == "import":
            stored.append(done)

    with pytest.raises(_bundle.BundleError, match="changed while it was imported"):
        _bundle.import_dir(
            dest, path, _bundle.probe_machine(False), trust_unsigned=True,
            progress=import_progress,
        )  # fmt: skip
    assert stored == list(range(1, N))  # the entries before the last were stored...
    assert stored_rows(dest) == 0  # ...and removed


def test_export_leaves_out_what_import_would_refuse(tmp_path, source):
    """An entry whose metadata is over a bundle's limits (a 5,000-character function
    name) is left out and counted, so every bundle export writes imports."""
    import shutil

    cache = tmp_path / "cache"
    shutil.copytree(source, cache)
    con = sqlite3.connect(cache / "store" / "store.db")
    (key,) = con.execute("SELECT key FROM entries LIMIT 1").fetchone()
    con.execute("UPDATE entries SET function_name = ? WHERE key = ?", ("f" * 5000, key))
    con.commit()
    con.close()
    out = tmp_path / "out.pcb"
    r = pcache_cli("--dir", str(cache), "export", str(out), "--all")
    assert r.exit_code == 0, r.output
    assert "Left out 1 entries whose metadata a bundle cannot carry." in r.output
    r = pcache_cli("--dir", str(tmp_path / "dest"), "import", str(out), "--trust-unsigned")
    assert r.exit_code == 0 and f"Imported {N - 1} of {N - 1}" in r.output, r.output


def _depth(v) -> int:
    if isinstance(v, dict):
        return 1 + max(map(_depth, v.values()), default=0)
    if isinstance(v, list):
        return 1 + max(map(_depth, v), default=0)
    return 0


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(alphabet=st.sampled_from('ab"\\[]{}\u00e9\U0001f600')),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=60,
)  # fmt: skip


def _deepen(v, n: int):
    for i in range(n):
        v = [v] if i % 2 else {"k": v}
    return v


@settings(max_examples=300, deadline=None)
@given(_json, st.integers(min_value=0, max_value=40))
def test_a_record_is_parsed_exactly_when_json_nests_it_at_most_32_deep(v, extra_depth):
    """The byte-level nesting check agrees with the parsed value's depth (strings
    full of brackets, quotes and escapes included), and changes nothing it accepts."""
    v = _deepen(v, extra_depth)
    text = json.dumps(v).encode()
    if _depth(v) <= _bundle.MAX_DEPTH:
        assert _bundle._loads(text) == v
    else:
        with pytest.raises(ValueError, match="nested more than 32 deep"):
            _bundle._loads(text)


def test_a_long_working_set_spans_records_and_comes_back_whole(tmp_path, source, monkeypatch):
    monkeypatch.setattr(_bundle, "_SET_SLICE", 1)  # one key per record
    path = tmp_path / "sliced.pcb"
    out = _bundle.export_dir(source, path, working_sets=["fault_prog"])
    assert (out.entries, out.working_sets) == (N, 1)
    assert _bundle._HEADER.unpack_from(path.read_bytes(), len(_bundle.MAGIC))[2] == N
    m = _bundle.read_manifest(path)
    assert len(m["working_sets"]) == 1 and len(m["working_sets"][0]["keys"]) == N
    with Store(source / "store") as s:
        (name,) = [n for n, _, _ in s.key_sets() if "fault_prog" in n]
        order = s.key_set(name)
    _bundle.import_dir(tmp_path / "dest", path, _bundle.probe_machine(False), trust_unsigned=True)
    with Store(tmp_path / "dest" / "store") as s:
        assert s.key_set(name) == order


# -- kill -9 while importing: nothing or everything --------------------------------------

KILL_N = 40  # entries of the synthetic bundle: half inline, half side files


def _synthetic_source(cache: Path, n: int) -> None:
    """A cache directory of ``n`` entries signed with its secret, as pcache writes
    them (random bytes: half small, half big enough for side files)."""
    import random
    from importlib.metadata import version

    from pcache._config import Layout
    from pcache._signing import Signer, load_secret

    cache.mkdir(mode=0o700, parents=True)
    layout = Layout(cache)
    signer = Signer(load_secret(layout.secret, create=True), layout.secret)
    rng = random.Random(26)
    with Store(layout.store) as s:
        for i in range(n):
            raw = rng.randbytes(400_000 if i % 2 else 2_000)
            key = hashlib.sha256(b"entry %d" % i).hexdigest()
            meta = {"backend": "cpu", "device_kind": "cpu", "jax_version": jax.__version__,
                    "jaxlib_version": version("jaxlib"), "function_name": f"f{i}",
                    "compile_seconds": 1.0}  # fmt: skip
            s.put(key, raw, meta={**meta, "extra": signer.seal(key, raw, {})})
        s.put_key_set("prog", [hashlib.sha256(b"entry %d" % i).hexdigest() for i in range(n)])


_SELF_KILL = (
    "import os, signal, sys\n"
    "from pcache import _bundle\n"
    "dest, path, at = sys.argv[1], sys.argv[2], int(sys.argv[3])\n"
    "def progress(phase, done, total, nbytes, total_bytes):\n"
    "    if phase == 'import' and done == at:\n"
    "        os.kill(os.getpid(), signal.SIGKILL)\n"
    "if at < 0:  # killed as soon as the transaction committed\n"
    "    from pcache.store import Store\n"
    "    put_many = Store.put_many\n"
    "    def committed(self, *a, **kw):\n"
    "        put_many(self, *a, **kw)\n"
    "        os.kill(os.getpid(), signal.SIGKILL)\n"
    "    Store.put_many = committed\n"
    "_bundle.import_dir(dest, path, _bundle.probe_machine(False), trust_unsigned=True,\n"
    "                   progress=progress)\n"
    "print('finished')\n"
)


def _bundle_keys_stored(cache: Path, keys: set[str]) -> int:
    db = cache / "store" / "store.db"
    if not db.exists():
        return 0
    con = sqlite3.connect(db)
    try:
        if not con.execute("SELECT 1 FROM sqlite_master WHERE name = 'entries'").fetchone():
            return 0  # killed while the store was created: an empty database, as Store makes it
        return sum(1 for (k,) in con.execute("SELECT key FROM entries") if k in keys)
    finally:
        con.close()


def _assert_nothing_or_everything(dest: Path, keys: set[str]) -> int:
    stored = _bundle_keys_stored(dest, keys)
    assert stored in (0, len(keys)), f"{stored} of {len(keys)} entries stored"
    if (dest / "store" / "store.db").exists():
        proc = subprocess.run(
            [sys.executable, "-m", "pcache", "--dir", str(dest), "verify"],
            cwd=ROOT, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "Traceback" not in proc.stderr
    return stored


def test_an_import_killed_at_any_point_stores_nothing_or_everything(tmp_path):
    """`pcache import` killed with SIGKILL: at each point its values are being
    stored (the process kills itself there), and from outside at delays spread over
    a whole import. Afterwards the store holds none of the bundle's entries or all
    of them, and `pcache verify` passes; an import run again completes."""
    import random
    import signal
    import time

    source = tmp_path / "source"
    _synthetic_source(source, KILL_N)
    path = tmp_path / "many.pcb"
    r = pcache_cli("--dir", str(source), "export", str(path), "--all", "--json")
    assert r.exit_code == 0 and json.loads(r.output)["entries"] == KILL_N, r.output
    keys = {hashlib.sha256(b"entry %d" % i).hexdigest() for i in range(KILL_N)}
    env = {k: v for k, v in os.environ.items() if not k.startswith("JAX_PCACHE_")}

    # Killed while the transaction is prepared (after 1, half, all values), and
    # right after it committed.
    for at, expected in ((1, 0), (KILL_N // 2, 0), (KILL_N, 0), (-1, KILL_N)):
        dest = tmp_path / f"self-{at}"
        proc = subprocess.run(
            [sys.executable, "-c", _SELF_KILL, str(dest), str(path), str(at)],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=240,
        )  # fmt: skip
        assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
        assert _assert_nothing_or_everything(dest, keys) == expected

    cmd = [sys.executable, "-m", "pcache", "import", str(path), "--no-device-check",
           "--trust-unsigned"]  # fmt: skip
    t0 = time.monotonic()
    full = subprocess.run([*cmd[:3], "--dir", str(tmp_path / "timed"), *cmd[3:]], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=240)  # fmt: skip
    took = time.monotonic() - t0
    assert full.returncode == 0, full.stderr
    assert _bundle_keys_stored(tmp_path / "timed", keys) == KILL_N
    rng = random.Random(9)
    outcomes = []
    for i in range(8):  # from outside: anywhere from start-up to the last commit
        dest = tmp_path / f"outside-{i}"
        child = subprocess.Popen([*cmd[:3], "--dir", str(dest), *cmd[3:]], cwd=ROOT, env=env,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
        time.sleep(took * (0.4 + 0.8 * rng.random()))
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=60)
        outcomes.append(_assert_nothing_or_everything(dest, keys))
        again = subprocess.run([*cmd[:3], "--dir", str(dest), *cmd[3:]], cwd=ROOT, env=env,
                               capture_output=True, text=True, timeout=240)  # fmt: skip
        assert again.returncode == 0, again.stderr
        assert _bundle_keys_stored(dest, keys) == KILL_N
    print("outside kills, entries stored:", outcomes)
