"""Hostile and failing storage: nothing in the cache directory may crash, stall or
switch off the user's program.

Each test damages a real cache directory (real SQLite files, real side files, a
real full or read-only filesystem where root can mount one) and runs a real
program in a fresh process that never imports pcache (``JAX_PCACHE_DIR`` alone).
Asserted: results bitwise equal to stock JAX, compile counts, at most one warning
per cause, and what ``pcache verify`` says.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import zstandard
from click.testing import CliRunner
from pcache.store import Store

from pcache.cli import cli
from tests import zygote

pytestmark = pytest.mark.timeout(300)

PROG = Path(__file__).with_name("fault_prog.py")
ROOT = PROG.parent.parent
N = 3  # programs the fault program compiles


def run(cache: Path | None, n: int = N, **env: str) -> dict:
    full = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("JAX_PCACHE_") or k == "JAX_PCACHE_CHECK"
    }
    if cache is not None:
        full["JAX_PCACHE_DIR"] = str(cache)
    full.update(env)
    proc = zygote.run([str(PROG), str(n)], full, ROOT, 240)
    assert proc.returncode == 0, proc.stderr[-4000:]
    (line,) = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    return json.loads(line)


@pytest.fixture(scope="module")
def stock() -> dict:
    return run(None)


@pytest.fixture(scope="module")
def warm_once(tmp_path_factory: pytest.TempPathFactory, stock: dict) -> Path:
    cache = tmp_path_factory.mktemp("warm") / "cache"
    cold = run(cache)
    assert cold["digest"] == stock["digest"] and cold["compiles"] == N
    return cache


@pytest.fixture
def warm(tmp_path: Path, warm_once: Path) -> Path:
    """A copy of one cache a cold process filled (no process has it open)."""
    cache = tmp_path / "cache"
    shutil.copytree(warm_once, cache)
    return cache


def cli_run(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False, prog_name="pcache")


def db(cache: Path) -> sqlite3.Connection:
    return sqlite3.connect(cache / "store" / "store.db", isolation_level=None)


def sql(cache: Path, *statements: str) -> None:
    con = db(cache)
    try:
        for s in statements:
            con.execute(s)
    finally:
        con.close()


def assert_clean(out: dict, stock: dict, *, compiles: int, warnings: int = 1) -> None:
    """Stock results, the expected compiles, and at most ``warnings`` records (one
    per cause) and no Python warning from pcache."""
    assert out["digest"] == stock["digest"]
    assert out["compiles"] == compiles, out
    assert len(out["records"]) <= warnings, out["records"]
    assert not [w for w in out["warnings"] if "pcache" in w], out["warnings"]


# -- 1. metadata is validated, and what decides loading is signed -------------------------

EDITS = {
    "compile_seconds text": "UPDATE entries SET compile_seconds = 'abc'",
    "raw_size text": "UPDATE entries SET raw_size = 'x'",
    "stored_size negative": "UPDATE entries SET stored_size = -1",
    "hits text": "UPDATE entries SET hits = 'many'",
    "last_used blob": "UPDATE entries SET last_used = x'00ff'",
    "extra not json": "UPDATE entries SET extra = '{not json'",
    "codec number": "UPDATE entries SET codec = 7",
    "side-file name": "UPDATE entries SET file = '../../secret.key'",
    "raw_size 3 GB": "UPDATE entries SET raw_size = 3000000000",
    "stored_size 5 GB": "UPDATE entries SET stored_size = 5000000000",
}


@pytest.mark.parametrize("edit", EDITS, ids=list(EDITS))
def test_edited_metadata_never_reaches_the_program(warm, stock, edit):
    sql(warm, EDITS[edit])
    for args in (["ls"], ["stats"], ["stats", "--json"], ["ls", "--json"]):
        r = cli_run("--dir", str(warm), *args)
        assert r.exit_code == 0 and "Traceback" not in r.output, (args, r.output)
    r = cli_run("--dir", str(warm), "verify")
    assert r.exit_code == 1 and r.output.count("corrupt: ") == N, r.output
    out = run(warm)
    assert_clean(out, stock, compiles=N)  # removed and compiled again
    assert out["vmhwm_kib"] < stock["vmhwm_kib"] + 200 * 1024  # nothing sized by the row
    assert cli_run("--dir", str(warm), "verify").exit_code == 0  # and stored again, soundly
    if edit == "side-file name":  # (one edit enough for the next process's hits)
        assert run(warm)["compiles"] == 0


def test_a_signed_field_edited_to_another_valid_value_is_refused(warm, stock):
    """A raw size that is a valid count but not the one signed: refused before any
    value byte is read (the head HMAC), removed, compiled again."""
    sql(warm, "UPDATE entries SET raw_size = raw_size + 1")
    r = cli_run("--dir", str(warm), "verify")
    assert r.exit_code == 1 and "HMAC" in r.output
    out = run(warm)
    assert_clean(out, stock, compiles=N)
    assert out["stats"]["error_causes"] == {"load entry": N}


def _bomb(claim: int) -> bytes:
    """A small zstd frame whose header claims ``claim`` bytes (zeros)."""
    c = zstandard.ZstdCompressor(level=1).compressobj(size=claim)
    chunk = bytes(1 << 20)
    parts = [c.compress(chunk) for _ in range(claim // len(chunk))]
    return b"".join(parts) + c.flush()


@pytest.mark.parametrize("raw_size", ["claimed", "kept"])
def test_decompression_bomb_is_refused_before_inflating(warm, stock, raw_size):
    """A 2 GiB claim in a small frame, in place of every entry. With the row's raw
    size rewritten to match (the attacker writes that column too) the signed head
    refuses it; with the size kept the frame header disagrees with the row. Either
    way nothing is inflated: the peak RSS stays near a stock run's."""
    claim = 2 * 2**30
    bomb = _bomb(claim)
    assert len(bomb) < 256 * 1024
    con = db(warm)
    with con:
        for (rowid,) in con.execute("SELECT id FROM entries").fetchall():
            con.execute("UPDATE blobs SET data = ? WHERE id = ?", (bomb, rowid))
            con.execute(
                "UPDATE entries SET codec = 'zstd', stored_size = ?"
                + (", raw_size = ?" if raw_size == "claimed" else "")
                + " WHERE id = ?",
                (len(bomb), claim, rowid) if raw_size == "claimed" else (len(bomb), rowid),
            )
    con.close()
    r = cli_run("--dir", str(warm), "verify")
    assert r.exit_code == 1 and r.output.count("corrupt: ") == N, r.output
    assert ("HMAC" if raw_size == "claimed" else "frame claims") in r.output, r.output
    out = run(warm)
    assert_clean(out, stock, compiles=N)
    assert out["vmhwm_kib"] < stock["vmhwm_kib"] + 200 * 1024, (
        out["vmhwm_kib"],
        stock["vmhwm_kib"],
    )


def test_a_bare_store_bounds_what_a_row_may_claim(tmp_path):
    with Store(tmp_path, max_value_size=2**20) as s:
        s.put("k", b"v" * 1000, meta={})
    bomb = _bomb(64 * 2**20)
    sql_con = sqlite3.connect(tmp_path / "store.db", isolation_level=None)
    sql_con.execute("UPDATE blobs SET data = ?", (bomb,))
    sql_con.execute("UPDATE entries SET stored_size = ?, raw_size = ?", (len(bomb), 64 * 2**20))
    sql_con.close()
    with Store(tmp_path, max_value_size=2**20) as s, pytest.warns(Warning, match="max_value_size"):
        assert s.get("k") is None


# -- 3. the secret ------------------------------------------------------------------------


def test_a_truncated_secret_is_replaced(warm, stock):
    """What a full disk left with pcache <= 0.1: an empty secret.key. Nothing can
    have signed with it, so it is replaced; the entries signed with the old one fail
    their HMAC and are compiled again."""
    (warm / "secret.key").write_bytes(b"")
    r = cli_run("--dir", str(warm), "verify")
    assert r.exit_code == 1 and "truncated" in r.output
    out = run(warm)
    assert out["stats"]["enabled"] and out["digest"] == stock["digest"]
    assert out["compiles"] == N and len((warm / "secret.key").read_bytes()) == 32
    assert run(warm)["compiles"] == 0


def test_verify_fix_replaces_a_truncated_secret(warm):
    (warm / "secret.key").write_bytes(b"abc")
    r = cli_run("--dir", str(warm), "verify", "--fix")
    assert "made a new one" in r.output, r.output
    assert len((warm / "secret.key").read_bytes()) == 32


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="mounting a filesystem needs root")


@contextlib.contextmanager
def tmpfs(path: Path, size: str = "8m"):
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], check=True)
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def _fill_disk(mount: Path) -> Path:
    filler = mount / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
    try:
        with contextlib.suppress(OSError):
            while True:
                os.write(fd, bytes(65536))
        with contextlib.suppress(OSError):
            while True:
                os.write(fd, b"x")
    finally:
        os.close(fd)
    return filler


@needs_root
def test_full_disk_at_creation_never_leaves_a_broken_secret(tmp_path, stock):
    with tmpfs(tmp_path / "m") as m:
        filler = _fill_disk(m)
        out = run(m / "cache")
        assert out["digest"] == stock["digest"] and out["compiles"] == N
        assert len(out["records"]) <= 1
        secret = m / "cache" / "secret.key"
        assert not secret.exists() or len(secret.read_bytes()) == 32
        filler.unlink()
        out = run(m / "cache")
        assert out["stats"]["enabled"] and out["compiles"] == N
        assert not any("not enabled" in r for r in out["records"]), out["records"]
        assert run(m / "cache")["compiles"] == 0


# -- 4, 5. a store that cannot be written is still read ------------------------------------


@needs_root
def test_full_disk_store_is_still_read(tmp_path, stock):
    with tmpfs(tmp_path / "m", "32m") as m:
        cache = m / "cache"
        assert run(cache)["compiles"] == N
        _fill_disk(m)
        out = run(cache)
        assert_clean(out, stock, compiles=0)
        out = run(cache, n=N + 2)  # two new programs: compiled, not stored, no crash
        assert out["compiles"] == 2 and len(out["records"]) <= 2, out["records"]


@contextlib.contextmanager
def read_only(path: Path):
    """``path`` seen read-only at a new place: a read-only bind mount as root (root
    ignores permissions), else the same directory with every write bit removed."""
    if os.geteuid() == 0:
        view = path.with_name(path.name + "-ro")
        view.mkdir()
        subprocess.run(["mount", "--bind", str(path), str(view)], check=True)
        subprocess.run(["mount", "-o", "remount,bind,ro", str(view)], check=True)
        try:
            yield view
        finally:
            subprocess.run(["umount", "-l", str(view)], check=False)
        return
    modes = {p: p.stat().st_mode for p in [path, *path.rglob("*")]}
    for p, m in modes.items():
        p.chmod(m & ~0o222)
    try:
        yield path
    finally:
        for p, m in modes.items():
            p.chmod(m)


def test_read_only_cache_directory_is_used_for_hits(warm, stock):
    with read_only(warm) as view:
        out = run(view)
        assert_clean(out, stock, compiles=0)
        assert out["stats"]["disk_hits"] == N
        assert any("read-only" in r for r in out["records"])
        out = run(view, n=N + 2)
        assert out["compiles"] == 2 and out["stats"]["writes_skipped"] == 2
        assert len(out["records"]) == 1, out["records"]
        r = cli_run("--dir", str(view), "ls")
        assert r.exit_code == 0 and "Traceback" not in r.output
        r = cli_run("--dir", str(view), "verify", "--fix")
        assert r.exit_code == 1 and "read-only: " in r.output, r.output


# -- 6. a damaged database is moved aside ---------------------------------------------------


def _garbage(cache: Path) -> None:
    (cache / "store" / "store.db").write_bytes(b"garbage" * 4096)
    for suffix in ("-wal", "-shm"):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(f"{cache / 'store' / 'store.db'}{suffix}")


DAMAGE = {
    "garbage": _garbage,
    "truncated": lambda c: os.truncate(c / "store" / "store.db", 4096 + 512),
    "impossible version": lambda c: sql(c, "PRAGMA user_version = -7"),
}


@pytest.mark.parametrize("damage", DAMAGE, ids=list(DAMAGE))
def test_damaged_database_is_moved_aside_and_replaced(warm, stock, damage):
    sql(warm, "PRAGMA wal_checkpoint(TRUNCATE)")
    assert (warm / "store" / "store.db").stat().st_size > 4 * (4096 + 512)  # (cut: real pages)
    DAMAGE[damage](warm)
    out = run(warm)
    assert_clean(out, stock, compiles=N)
    assert any("moved it aside" in r for r in out["records"]), out["records"]
    assert len(list((warm / "store").glob("store.db.damaged-*[0-9]"))) == 1
    again = run(warm)
    assert again["compiles"] == 0 and not again["records"]


def test_newer_database_is_left_untouched(warm, stock):
    from pcache.store import SCHEMA_VERSION

    sql(warm, f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    before = (warm / "store" / "store.db").read_bytes()
    out = run(warm)
    assert_clean(out, stock, compiles=N)
    assert out["stats"]["enabled"] and any("memory only" in r for r in out["records"])
    assert (warm / "store" / "store.db").read_bytes() == before


# -- 7, 8. damaged entries: once per cause; a missing inline value -------------------------


def test_damaged_entries_are_reported_once_per_cause(warm, stock):
    con = db(warm)
    with con:
        for rowid, data in con.execute("SELECT id, data FROM blobs").fetchall():
            damaged = bytearray(data)
            damaged[len(damaged) // 2] ^= 0xFF
            con.execute("UPDATE blobs SET data = ? WHERE id = ?", (bytes(damaged), rowid))
    con.close()
    out = run(warm)
    assert_clean(out, stock, compiles=N)


def test_missing_inline_value_is_a_corrupt_entry(warm, stock):
    sql(warm, "DELETE FROM blobs")
    r = cli_run("--dir", str(warm), "verify")
    assert r.exit_code == 1 and r.output.count("missing value: ") == N, r.output
    out = run(warm)
    assert_clean(out, stock, compiles=N)
    assert run(warm)["compiles"] == 0


# -- 9. a stopped lock holder ------------------------------------------------------------

HOLDER = """
import sys, time
from pathlib import Path
from pcache._flight import Flight
t = Flight(Path(sys.argv[1]), timeout=600).claim(sys.argv[2])
assert t.held
print("held", flush=True)
time.sleep(float(sys.argv[3]))
t.release()
"""


@pytest.mark.parametrize("stopped", [True, False], ids=["stopped", "alive"])
def test_waiters_tell_a_stopped_holder_from_a_live_one(warm, stock, stopped):
    """A holder that beats is waited for (past the stale age); one stopped with
    SIGSTOP is given up on after the stale age, not the 10-minute lock timeout."""
    run(warm, n=1)
    key = next(iter(_keys(warm)))
    sql(warm, "DELETE FROM entries")
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(warm / "locks"), key, "30" if stopped else "9"],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        if stopped:
            os.kill(holder.pid, signal.SIGSTOP)
        t0 = time.monotonic()
        out = run(warm, n=1, JAX_PCACHE_LOCK_STALE="3s")
        took = time.monotonic() - t0
        assert out["digest"] == run(None, n=1)["digest"] and out["compiles"] == 1
        if stopped:
            assert took < 20, took  # the holder would never have released
            assert any("stopped beating" in r for r in out["records"]), out["records"]
        else:
            assert took >= 8, took  # waited for the live holder past the stale age
            assert not out["records"], out["records"]
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(holder.pid, signal.SIGCONT)
        holder.kill()
        holder.wait()


def _keys(cache: Path) -> list[str]:
    con = db(cache)
    try:
        return [k for (k,) in con.execute("SELECT key FROM entries ORDER BY created")]
    finally:
        con.close()


# -- 10. a directory others may write ------------------------------------------------------


def test_directory_writable_by_others_is_warned_about_once(warm, stock):
    warm.chmod(0o777)
    out = run(warm)
    assert_clean(out, stock, compiles=0)
    assert len(out["records"]) == 1 and "writable by others" in out["records"][0]
    r = cli_run("--dir", str(warm), "verify")
    assert r.exit_code == 1 and "unsafe:" in r.output


# -- the zero-code path: JAX_PCACHE_DIR alone, the first JAX call a jit -------------


def test_zero_code_first_jit_is_served_by_the_jit_seam(tmp_path, stock):
    """pcache switches on inside the first jit's lowering (JAX starts its backends,
    and the plugin, there). That lowering is still keyed, stored and, in a warm
    process, skipped: nothing is lowered or compiled, not even the first program."""
    cache = tmp_path / "cache"
    cold = run(cache, FAULT_PROG_FIRST_JIT="1")
    assert cold["digest"] == stock["digest"] and not cold["records"]
    assert cold["stats"]["compiles"] == N and cold["stats"]["hlo_compiles"] == 0
    hot = run(cache, FAULT_PROG_FIRST_JIT="1")
    assert hot["digest"] == stock["digest"] and not hot["records"]
    assert (hot["compiles"], hot["lowerings"]) == (0, 0)
    assert hot["stats"]["disk_hits"] == N
    # The same keys as a process that started its backends before the first jit.
    warm_started = run(cache)
    assert (warm_started["compiles"], warm_started["lowerings"]) == (0, 0)
    assert len(_keys(cache)) == N


def test_zero_code_processes_starting_together_compile_each_program_once(tmp_path, stock):
    """Four zero-code processes whose first JAX call is a jit, starting together on
    an empty cache, compile each program once, the first one included."""
    cache = tmp_path / "cache"
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("JAX_PCACHE_") or k == "JAX_PCACHE_CHECK"
    }
    env.update(JAX_PCACHE_DIR=str(cache), FAULT_PROG_FIRST_JIT="1")
    procs = [
        subprocess.Popen(
            [sys.executable, str(PROG), str(N)],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    rows = []
    for p in procs:
        out, err = p.communicate(timeout=240)
        assert p.returncode == 0, err[-3000:]
        rows.append(json.loads(out.strip().splitlines()[-1]))
    assert all(r["digest"] == stock["digest"] and not r["records"] for r in rows)
    assert sum(r["compiles"] for r in rows) == N, [r["compiles"] for r in rows]
    assert sum(r["stats"]["compiles"] for r in rows) == N
    assert sum(r["stats"]["hlo_compiles"] for r in rows) == 0
