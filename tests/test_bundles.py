"""Warm-cache bundles (issue 16): `pcache export` in one directory, `pcache import`
into another with its own secret, programs in new processes start warm.

Programs run in real subprocesses (tests/fault_prog.py: ``JAX_PCACHE_DIR`` alone),
compile counts through `jax.monitoring`, results compared with stock JAX; bundles
are real files, edited and cut the way a bad copy or an attacker would.
"""

from __future__ import annotations

import hashlib
import importlib.resources
import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import jax
import jsonschema
import pytest
from click.testing import CliRunner
from pcache.store import Store

from pcache import _bundle
from pcache.cli import cli

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
    proc = subprocess.run(
        [sys.executable, str(PROG), str(n)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
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
    r = pcache_cli("--dir", str(dest), "import", str(bundle), "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert (out["imported"], out["present"], out["skipped"]) == (N, 0, {})
    assert (dest / "secret.key").read_bytes() != (source / "secret.key").read_bytes()
    warm = run(dest)
    assert warm["digest"] == stock["digest"] and not warm["records"]
    assert (warm["compiles"], warm["lowerings"]) == (0, 0)
    # The working set came with its order: the run preloaded what it would use.
    assert warm["stats"]["preload_hits"] >= N - 1
    # Importing again changes nothing.
    before = entries(dest)
    again = json.loads(pcache_cli("--dir", str(dest), "import", str(bundle), "--json").output)
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
    _, length, _, _ = _bundle._HEADER.unpack_from(data, len(_bundle.MAGIC))
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
    ],
)
def test_a_damaged_bundle_is_refused_whole(tmp_path, bundle, edit, message):
    bad = _edited(bundle, tmp_path, edit)
    dest = tmp_path / "dest"
    r = pcache_cli("--dir", str(dest), "import", str(bad))
    assert r.exit_code == 1
    assert message in r.output and "nothing was imported" in r.output
    assert not (dest / "store" / "store.db").exists() or entries(dest) == {}


def _rewritten(bundle: Path, tmp_path: Path, change) -> Path:
    """The bundle an honest exporter elsewhere would have written: its manifest
    changed by ``change`` and its digest recomputed (unsigned)."""
    data = bundle.read_bytes()
    start = _start(data)
    manifest = json.loads(data[_bundle._START : start])
    change(manifest)
    text = json.dumps(manifest, separators=(",", ":"), sort_keys=True).encode()
    header = _bundle.MAGIC + _bundle._HEADER.pack(
        _bundle.BUNDLE_FORMAT, len(text), hashlib.sha256(text).digest(), bytes(32)
    )
    out = tmp_path / "rewritten.pcb"
    out.write_bytes(header + text + data[start:])
    return out


def test_entries_for_another_jax_or_device_are_skipped_and_counted(tmp_path, bundle, stock):
    def change(m):
        m["entries"][0]["jax_version"] = "0.0.1"
        m["entries"][1]["device_kind"] = "TPU v9"

    foreign = _rewritten(bundle, tmp_path, change)
    dest = tmp_path / "dest"
    r = pcache_cli("--dir", str(dest), "import", str(foreign), "--json")
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
        "--dir", str(tmp_path / "dest"), "import", str(_rewritten(bundle, tmp_path, change))
    )
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
    r = pcache_cli("--dir", str(dest), "import", str(bundle), "--max-size", str(smallest), "--json")
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
    got = pcache.import_bundle(path, directory=tmp_path / "dest", device_check=False)
    assert got["imported"] == N
    with pytest.raises(pcache.BundleError, match="not a pcache bundle"):
        pcache.import_bundle(source / "secret.key", directory=tmp_path / "dest")
    assert run(tmp_path / "dest")["compiles"] == 0
