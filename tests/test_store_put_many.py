"""Store.put_many: entries (and key sets) stored in one transaction, all or none.

The crash case (a real kill -9 of an importing process) is in tests/test_bundles.py;
here: every way put_many can fail part way leaves the store as it was, side files
included.
"""

from __future__ import annotations

import os

import pytest
from pcache.store import Store, StoreError, StoreReadOnlyError

BIG = 300 * 1024  # stored in a side file (over the inline threshold, incompressible)


def _values(n: int, fail_at: int | None = None):
    for i in range(n):
        if i == fail_at:
            raise RuntimeError("the source failed")
        size = BIG if i % 2 else 100
        yield f"k{i}", os.urandom(size), {"function_name": f"f{i}", "compile_seconds": 0.5}


def _side_files(s: Store) -> set[str]:
    return set(s._files.listing())


def test_all_entries_and_key_sets_are_stored(tmp_path):
    with Store(tmp_path) as s:
        s.put("old", b"x" * 10, meta={})
        assert s.put_many(_values(6), key_sets={"prog": ["k0", "k5", "old"]}) == 6
        assert len(s) == 7 and all(f"k{i}" in s for i in range(6))
        assert s.key_set("prog") == ["k0", "k5", "old"]
        assert s.entry("k3").function_name == "f3" and len(s.get("k3")) == BIG
        assert s.stats()["puts"] == 7
        assert s.verify().ok


@pytest.mark.parametrize("fail_at", [0, 3, 5])
def test_a_failing_iterable_stores_nothing_and_leaves_no_side_file(tmp_path, fail_at):
    with Store(tmp_path) as s:
        s.put("old", b"x" * 10, meta={})
        s.put_key_set("prog", ["old"])
        before = _side_files(s)
        with pytest.raises(RuntimeError, match="the source failed"):
            s.put_many(_values(6, fail_at), key_sets={"prog": ["k0"]})
        assert [e.key for e in s.entries()] == ["old"]
        assert s.key_set("prog") == ["old"]
        assert _side_files(s) == before
        assert s.stats()["puts"] == 1


def test_a_refused_value_stores_nothing(tmp_path):
    def values():
        yield from _values(3)
        yield "bad", b"v", {"no_such_meta": 1}

    with Store(tmp_path) as s:
        with pytest.raises(ValueError, match="unknown meta keys"):
            s.put_many(values())
        assert len(s) == 0 and not _side_files(s)


def test_a_failed_commit_stores_nothing(tmp_path, monkeypatch):
    with Store(tmp_path) as s:
        real = s._db.write

        def write(what, fn, **kw):
            def failing(con):
                fn(con)
                raise OSError(28, "No space left on device")

            return real(what, failing, **kw)

        monkeypatch.setattr(s._db, "write", write)
        with pytest.raises(StoreError):
            s.put_many(_values(4))
        monkeypatch.undo()
        assert len(s) == 0 and not _side_files(s)
        assert s.verify().ok


def test_a_key_given_twice_keeps_its_last_value(tmp_path):
    big = os.urandom(BIG)
    with Store(tmp_path) as s:
        s.put("k", b"first", meta={})
        assert s.put_many([("k", big, {}), ("k", b"last", {})]) == 2
        assert s.get("k") == b"last" and len(s) == 1
        assert not _side_files(s)  # the first's side file, replaced in the same put
        assert s.verify().ok


def test_eviction_runs_once_after_the_batch(tmp_path):
    with Store(tmp_path, max_bytes=2 * BIG) as s:
        s.put_many((f"k{i}", os.urandom(BIG // 2), {}) for i in range(8))
        assert s.stats()["stored_bytes"] <= 2 * BIG
        assert s.stats()["evictions"] == 8 - len(s)


def test_nothing_to_store_writes_nothing(tmp_path):
    with Store(tmp_path) as s:
        assert s.put_many([]) == 0
        assert s.stats()["puts"] == 0


def test_read_only_refuses(tmp_path):
    with Store(tmp_path) as s:
        s.put("k", b"v", meta={})
    with Store(tmp_path, read_only=True) as s:
        with pytest.raises(StoreReadOnlyError):
            s.put_many(_values(2))
        assert len(s) == 1
