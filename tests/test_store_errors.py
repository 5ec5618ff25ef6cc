"""Corruption, schema versions and hostile environments, each mapped to a clear error."""

from __future__ import annotations

import hashlib
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import store_helpers
from pcache.store import (
    SCHEMA_VERSION,
    Store,
    StoreCorruptError,
    StoreCorruptionWarning,
    StoreError,
    StoreFullError,
    StoreLockedError,
    StorePermissionError,
    StoreVersionError,
)

pytestmark = pytest.mark.timeout(60)

HELPER = Path(store_helpers.__file__)


def _flip(path: Path, offset: int) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        b = f.read(1)
        f.seek(offset)
        f.write(bytes([b[0] ^ 0xFF]))


def test_flipped_byte_inline_is_detected(tmp_path):
    value = os.urandom(4000)  # incompressible: stored verbatim, so we can find it
    with Store(tmp_path) as s:
        s.put("bad", value, meta={})
        s.put("good", b"fine", meta={})
    db = tmp_path / "store.db"
    assert not (tmp_path / "store.db-wal").exists()  # checkpointed at close
    _flip(db, db.read_bytes().index(value[1000:1100]) + 50)
    with Store(tmp_path) as s:
        report = s.verify()
        assert report.corrupt == ["bad"] and not report.ok
        with pytest.warns(StoreCorruptionWarning, match="bad"):
            assert s.get("bad") is None
        assert "bad" not in s  # removed
        assert s.get("good") == b"fine"
        assert s.stats()["corrupt"] == 1
        assert s.verify().ok


def test_flipped_byte_side_file_is_detected(tmp_path):
    value = os.urandom(300_000)
    with Store(tmp_path, inline_threshold=1024) as s:
        s.put("bad", value, meta={})
        s.put("good", os.urandom(5000), meta={})
        (name,) = [r[0] for r in s._con().execute("SELECT file FROM entries WHERE key='bad'")]
        path = s._files.path(name)
        _flip(path, 123_456)
        report = s.verify()
        assert report.corrupt == ["bad"] and report.missing == []
        with pytest.warns(StoreCorruptionWarning):
            assert s.get("bad") is None
        assert not path.exists()
        assert s.get("good") is not None
        # a truncated file and a missing file are caught too
        s.put("trunc", value, meta={})
        s.put("gone", value, meta={})
        files = dict(s._con().execute("SELECT key, file FROM entries WHERE file NOT NULL"))
        os.truncate(s._files.path(files["trunc"]), 1000)
        os.unlink(s._files.path(files["gone"]))
        report = s.verify(fix=True)
        assert report.corrupt == ["trunc"] and report.missing == ["gone"] and report.fixed == 2
        assert len(s) == 1 and s.verify().ok


def _smash_pages(db: Path) -> None:
    data = bytearray(db.read_bytes())
    page = int.from_bytes(data[16:18], "big")
    # Smash every page after the first (the header stays valid): tables, indexes.
    for off in range(page, len(data), page):
        data[off : off + 64] = b"\xa5" * 64
    db.write_bytes(bytes(data))


def _fill(path: Path, n: int = 300) -> None:
    with Store(path) as s:
        for i in range(n):
            s.put(f"key-{i}", os.urandom(500), meta={"function_name": "f" * 50})


def _assert_replaced(path: Path, original: bytes, kept: int = 0) -> None:
    """The damaged database was moved aside intact, and the store works on a new one
    (holding the ``kept`` entries written after the replacement)."""
    (aside,) = path.glob("store.db.damaged-*[0-9]")
    assert aside.read_bytes() == original
    with Store(path) as s:
        assert len(s) == kept and s.get("key-7") is None
        s.put("new", b"v", meta={})
        assert s.get("new") == b"v" and s.verify().ok


def test_corrupt_page_raises_corrupt_error_without_repair(tmp_path):
    _fill(tmp_path)
    _smash_pages(tmp_path / "store.db")
    before = (tmp_path / "store.db").read_bytes()
    with pytest.raises(StoreCorruptError):
        with Store(tmp_path, repair=False) as s:
            list(s.entries())
            s.get("key-7")
    assert (tmp_path / "store.db").read_bytes() == before


def test_corrupt_pages_are_moved_aside_with_one_warning(tmp_path):
    _fill(tmp_path)
    _smash_pages(tmp_path / "store.db")
    before = (tmp_path / "store.db").read_bytes()
    with pytest.warns(StoreCorruptionWarning, match="moved it aside") as caught:
        with Store(tmp_path) as s:
            assert s.get("key-7") is None
            assert list(s.entries()) == []
    assert len([w for w in caught if w.category is StoreCorruptionWarning]) == 1
    _assert_replaced(tmp_path, before)


def test_database_truncated_mid_run_is_replaced(tmp_path):
    """Truncated while a store has it open: the first read that meets a missing page
    replaces it (every later run then starts from a sound, empty store)."""
    _fill(tmp_path, 2000)
    with Store(tmp_path) as s:
        assert s.get("key-1999") is not None
        db = tmp_path / "store.db"
        with open(db, "r+b") as f:
            f.truncate(db.stat().st_size // 3)
        before = db.read_bytes()
        with pytest.warns(StoreCorruptionWarning, match="damaged"):
            for i in range(2000):
                s.get(f"key-{i}")
        s.put("after", b"x", meta={})
        assert s.get("after") == b"x"
    _assert_replaced(tmp_path, before, kept=1)


def test_not_a_sqlite_file(tmp_path):
    (tmp_path / "store.db").write_bytes(b"this is not a database" * 100)
    with pytest.raises(StoreCorruptError):
        Store(tmp_path, repair=False)
    with pytest.warns(StoreCorruptionWarning, match="moved it aside"):
        Store(tmp_path).close()
    _assert_replaced(tmp_path, b"this is not a database" * 100)


def test_garbage_in_the_meta_table_is_tolerated(tmp_path):
    with Store(tmp_path) as s:
        s.put("k", b"v", meta={})
    con = sqlite3.connect(tmp_path / "store.db")
    with con:
        con.execute("UPDATE meta SET value = 'not a time' WHERE name = 'last_sweep'")
        con.execute("UPDATE totals SET stored_bytes = 'x', entries = -3")
        con.execute("INSERT OR REPLACE INTO counters (name, value) VALUES ('hits', 'lots')")
    con.close()
    with Store(tmp_path, max_bytes=10**6) as s:
        assert s.get("k") == b"v" and len(s) == 1
        st = s.stats()
        assert st["stored_bytes"] == 1 and isinstance(st["hits"], int)
        s.put("k2", b"w" * 100, meta={})


@pytest.mark.parametrize("version", [-5, SCHEMA_VERSION + 1000])
def test_impossible_schema_version_is_replaced(tmp_path, version):
    con = sqlite3.connect(tmp_path / "store.db")
    con.execute("CREATE TABLE other (x)")
    con.execute(f"PRAGMA user_version = {version}")
    con.close()
    with pytest.warns(StoreCorruptionWarning, match="impossible schema version"):
        Store(tmp_path).close()
    assert len(list(tmp_path.glob("store.db.damaged-*[0-9]"))) == 1


def test_foreign_sqlite_database_is_refused(tmp_path):
    con = sqlite3.connect(tmp_path / "store.db")
    con.execute("CREATE TABLE mine (x)")
    con.commit()
    con.close()
    with pytest.raises(StoreCorruptError, match="not a pcache store"):
        Store(tmp_path, repair=False)
    with pytest.warns(StoreCorruptionWarning, match="not a pcache store"):
        Store(tmp_path).close()
    (aside,) = tmp_path.glob("store.db.damaged-*[0-9]")
    assert sqlite3.connect(aside).execute("SELECT name FROM sqlite_master").fetchall() == [
        ("mine",)
    ]


def test_older_schema_migrates(tmp_path):
    values = {f"k{i}": os.urandom(100) * (i + 1) for i in range(5)}
    store_helpers.build_v1_store(str(tmp_path), values)
    with Store(tmp_path) as s:
        for k, v in values.items():
            assert s.get(k) == v
        e = s.entry("k2")
        assert e.function_name == "f2" and e.extra == {"v": 1} and e.compile_seconds == 3.0
        st = s.stats()
        assert st["entries"] == 5 and st["raw_bytes"] == sum(map(len, values.values()))
        s.put("new", os.urandom(300_000), meta={})  # side file: file_bytes trigger works
        assert s.stats()["file_bytes"] == 300_000
        # cost_log was back-filled: the eviction order is not all-ties
        con = s._con()
        assert len({r[0] for r in con.execute("SELECT cost_log FROM entries")}) == 6
        assert s.verify().ok
    con = sqlite3.connect(tmp_path / "store.db")
    assert con.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    plan = " ".join(
        str(r)
        for r in con.execute(
            "EXPLAIN QUERY PLAN SELECT id FROM entries ORDER BY (last_used / 86400.0 + cost_log)"
        )
    )
    assert "entries_cost" in plan
    con.close()


def test_newer_schema_is_refused_untouched(tmp_path):
    with Store(tmp_path) as s:
        s.put("k", b"v", meta={})
    con = sqlite3.connect(tmp_path / "store.db")
    con.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    con.close()
    before = hashlib.sha256((tmp_path / "store.db").read_bytes()).hexdigest()
    with pytest.raises(StoreVersionError, match="newer|understands"):
        Store(tmp_path)
    assert hashlib.sha256((tmp_path / "store.db").read_bytes()).hexdigest() == before


def _helper(*args: str, timeout: float = 30) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(HELPER), *args], capture_output=True, text=True, timeout=timeout
    )


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to drop privileges")
def test_unwritable_directory_and_readonly_db(tmp_path):
    tmp_path.chmod(0o755)
    root_owned = tmp_path / "ro"
    root_owned.mkdir(mode=0o755)
    # a fresh store in a directory we cannot write
    out = _helper("as-nobody", str(root_owned / "new"), "open")
    assert out.stdout.startswith("StorePermissionError True"), out.stdout + out.stderr
    out = _helper("as-nobody", str(root_owned), "open")
    assert out.stdout.startswith("StorePermissionError True"), out.stdout + out.stderr
    # an existing store whose files we cannot write
    with Store(root_owned) as s:
        s.put("k", b"v", meta={})
    out = _helper("as-nobody", str(root_owned), "put")
    assert out.stdout.startswith("StorePermissionError True"), out.stdout + out.stderr
    with Store(root_owned) as s:
        assert s.get("k") == b"v" and s.verify().ok


def test_path_under_a_regular_file(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(StoreError):
        Store(tmp_path / "file" / "store")


def test_locked_beyond_deadline(tmp_path):
    with Store(tmp_path) as s:
        s.put("k", b"v", meta={})
    holder = subprocess.Popen(
        [sys.executable, str(HELPER), "hold-write-lock", str(tmp_path), "30"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        with Store(tmp_path, busy_timeout=0.5) as s:
            assert s.get("k") == b"v"  # WAL: readers are not blocked
            t0 = time.monotonic()
            with pytest.raises(StoreLockedError) as info:
                s.put("k2", b"v2", meta={})
            assert 0.4 < time.monotonic() - t0 < 3
            assert isinstance(info.value, TimeoutError)
            assert s.get("k2") is None
            s._pending_hits.clear()  # nothing to flush at close while still locked
            s._pending_counters.clear()
            s._pending_n = 0
    finally:
        holder.kill()
        holder.wait()
    with Store(tmp_path) as s:
        s.put("k2", b"v2", meta={})
        assert s.verify().ok


def test_gc_file_lock_held_beyond_deadline(tmp_path):
    Store(tmp_path).close()
    holder = subprocess.Popen(
        [sys.executable, str(HELPER), "hold-file-lock", str(tmp_path), "30"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        with Store(tmp_path, busy_timeout=0.3) as s:
            s.put("k", b"v", meta={})  # ordinary writes do not need the file lock
            with pytest.raises(StoreLockedError):
                s.gc()
    finally:
        holder.kill()
        holder.wait()


def test_database_full(tmp_path):
    with Store(tmp_path) as s:
        s.put("keep", b"k" * 100, meta={})
        # SQLITE_FULL, as on a full disk: cap the database's page count.
        s._con().execute("PRAGMA max_page_count = 20")
        with pytest.raises(StoreFullError) as info:
            for i in range(100):
                s.put(f"k{i}", os.urandom(30_000), meta={})
        assert isinstance(info.value, OSError)
        s._con().execute("PRAGMA max_page_count = 1073741823")
        assert s.get("keep") == b"k" * 100
        assert s.verify().ok


def test_side_file_write_full(tmp_path):
    Store(tmp_path).close()
    out = _helper("fsize-limited-put", str(tmp_path), str(200_000), str(1_000_000))
    assert out.stdout.startswith("StoreFullError True"), out.stdout + out.stderr
    with Store(tmp_path, orphan_grace=0) as s:
        assert "big" not in s
        assert s.verify().ok  # the failed temp file was cleaned up
        assert not s._files.listing()


def test_exception_hierarchy():
    assert issubclass(StoreLockedError, StoreError) and issubclass(StoreLockedError, TimeoutError)
    assert issubclass(StoreFullError, OSError) and issubclass(StoreFullError, StoreError)
    assert issubclass(StorePermissionError, PermissionError)
    assert issubclass(StoreCorruptError, StoreError) and issubclass(StoreVersionError, StoreError)


def test_verify_reports_a_store_missing_part_of_its_schema(tmp_path):
    with Store(tmp_path) as s:
        s.put("k", b"v", meta={})
    con = sqlite3.connect(tmp_path / "store.db")
    con.execute("DROP INDEX entries_cost")
    con.close()
    with Store(tmp_path) as s:
        result = s.verify()
        assert not result.ok and result.integrity == ["schema: index entries_cost is missing"]
        assert not s.verify(fix=True).replaced  # recreated, nothing lost
        assert s.verify().ok and s.get("k") == b"v"
