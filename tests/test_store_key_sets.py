"""Key sets (named, ordered key lists: a program's working set) and untouched reads."""

from __future__ import annotations

import sqlite3
import time

import pytest
import store_helpers
from pcache.store import SCHEMA_VERSION, Store
from pcache.store import _store as store_mod

pytestmark = pytest.mark.timeout(60)


def _objects(path) -> set[tuple[str, str]]:
    con = sqlite3.connect(path)
    try:
        return {
            (t, n)
            for t, n in con.execute("SELECT type, name FROM sqlite_master")
            if n[:7] != "sqlite_"
        }
    finally:
        con.close()


def test_key_set_round_trip_and_replace(tmp_path):
    with Store(tmp_path) as s:
        assert s.key_set("prog") == []
        s.put_key_set("prog", ["b", "a", "c"])
        assert s.key_set("prog") == ["b", "a", "c"]  # order kept
        s.put_key_set("prog", ["z"])
        assert s.key_set("prog") == ["z"]
        s.put_key_set("other", [])
        assert [(n, k) for n, k, _ in s.key_sets()] == [("other", 0), ("prog", 1)]
    with Store(tmp_path) as s:  # persisted
        assert s.key_set("prog") == ["z"]


def test_key_sets_are_bounded(tmp_path, monkeypatch):
    monkeypatch.setattr(store_mod, "MAX_KEY_SETS", 3)
    monkeypatch.setattr(store_mod, "MAX_KEY_SET_LEN", 5)
    with Store(tmp_path) as s:
        s.put_key_set("long", [f"k{i}" for i in range(10)])
        assert s.key_set("long") == [f"k{i}" for i in range(5)]
        for i in range(4):
            time.sleep(0.002)
            s.put_key_set(f"set{i}", ["x"])
        assert [n for n, _, _ in s.key_sets()] == ["set3", "set2", "set1"]


def test_key_sets_go_with_clear_and_old_ones_with_gc(tmp_path):
    with Store(tmp_path) as s:
        s.put("k", b"v", meta={})
        s.put_key_set("prog", ["k"])
        s.clear()
        assert s.key_set("prog") == [] and len(s) == 0
        s.put_key_set("old", ["k"])
        s._con().execute("UPDATE key_sets SET updated = ?", (time.time() - 3600,))
        s.put_key_set("new", ["k"])
        s.gc(older_than=60)
        assert s.key_set("old") == [] and s.key_set("new") == ["k"]


def test_unreadable_key_set_is_empty_not_an_error(tmp_path):
    with Store(tmp_path) as s:
        s.put_key_set("prog", ["a"])
        s._con().execute("UPDATE key_sets SET keys = 'not json'")
        assert s.key_set("prog") == []
        assert s.key_sets()[0][1] == 0


def test_untouched_read_counts_nothing(tmp_path):
    with Store(tmp_path) as s:
        s.put("k", b"value", meta={})
        s.flush()
        used0 = s.entry("k").last_used
        time.sleep(0.01)
        raw, entry = s.get_entry("k", touch=False)
        assert raw == b"value" and entry.key == "k"
        assert s.get_entry("absent", touch=False) is None
        s.flush()
        st = s.stats()
        assert st["hits"] == 0 and st["misses"] == 0
        assert s.entry("k").hits == 0 and s.entry("k").last_used == used0
        s.touch("k")
        s.flush()
        assert s.stats()["hits"] == 1 and s.entry("k").hits == 1
        assert s.entry("k").last_used > used0


def test_v1_and_v2_stores_migrate_to_the_current_schema(tmp_path):
    fresh = tmp_path / "fresh"
    Store(fresh).close()
    want = _objects(fresh / "store.db")
    assert ("table", "key_sets") in want

    v1 = tmp_path / "v1"
    store_helpers.build_v1_store(str(v1), {"a": b"x" * 100})
    with Store(v1) as s:
        s.put_key_set("prog", ["a"])
        assert s.key_set("prog") == ["a"] and s.get("a") == b"x" * 100
    assert _objects(v1 / "store.db") == want

    # A version-2 store: today's schema without the key_sets table.
    v2 = tmp_path / "v2"
    with Store(v2) as s:
        s.put("a", b"y", meta={})
    con = sqlite3.connect(v2 / "store.db")
    con.execute("DROP TABLE key_sets")
    con.execute("PRAGMA user_version = 2")
    con.commit()
    con.close()
    with Store(v2) as s:
        assert s.get("a") == b"y" and s.key_set("prog") == []
        s.put_key_set("prog", ["a"])
    con = sqlite3.connect(v2 / "store.db")
    assert con.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 3
    con.close()
    assert _objects(v2 / "store.db") == want


def test_unverified_read_leaves_the_checksum_to_the_caller(tmp_path):
    from pcache.store import checksum_matches

    value = bytes(range(256)) * 4  # stored as zstd; make it identity to flip a byte
    with Store(tmp_path) as s:
        s.put("k", value, meta={})
        con = s._con()
        (rowid, checksum) = con.execute("SELECT id, checksum FROM entries").fetchone()
        damaged = bytearray(value)
        damaged[100] ^= 1
        con.execute(
            "UPDATE entries SET codec = 'identity', stored_size = ? WHERE id = ?",
            (len(value), rowid),
        )
        con.execute("UPDATE blobs SET data = ? WHERE id = ?", (bytes(damaged), rowid))
        raw, entry = s.get_entry("k", verify=False)  # sizes fine: returned as stored
        assert raw == bytes(damaged) and entry.checksum == checksum
        assert not checksum_matches(raw, entry.checksum) and checksum_matches(value, checksum)
        with pytest.warns(store_mod.StoreCorruptionWarning):
            assert s.get_entry("k") is None  # the verified read catches and removes it
        assert "k" not in s


def test_connections_of_finished_threads_are_closed(tmp_path):
    import threading

    with Store(tmp_path) as s:
        s.put("k", b"v", meta={})

        def read():
            assert s.get("k") == b"v"

        for _ in range(30):  # threads that end without release_connection()
            t = threading.Thread(target=read)
            t.start()
            t.join()
        read()  # a connection opened after they ended prunes theirs
        assert len(s._cons) <= 2
