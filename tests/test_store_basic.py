"""Round trips, metadata, counters and listing of store.Store (real files, no mocks)."""

from __future__ import annotations

import json
import os
import random
import sqlite3
from importlib.resources import files

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pcache.store import Entry, Store, StoreError

pytestmark = pytest.mark.timeout(120)

META = {
    "backend": "cpu",
    "device_kind": "cpu",
    "jax_version": "0.10.2",
    "jaxlib_version": "0.10.2",
    "function_name": "f",
    "compile_seconds": 1.25,
    "extra": {"donated": [0, 1], "note": "x"},
}


@pytest.fixture
def store(tmp_path):
    with Store(tmp_path / "s", inline_threshold=64 * 1024) as s:
        yield s


def _big_values():
    # Random bytes of a drawn length: cheap up to 8 MB, both sides of the threshold.
    sizes = st.one_of(
        st.integers(0, 1024),
        st.integers(60 * 1024, 70 * 1024),  # around inline_threshold = 64 KiB
        st.integers(70 * 1024, 8 * 2**20),
    )
    compressible = st.booleans()
    return st.builds(
        lambda n, c, seed: (
            (random.Random(seed).randbytes(max(1, n // 64)) * 64)[:n]
            if c
            else random.Random(seed).randbytes(n)
        ),
        sizes,
        compressible,
        st.integers(0, 2**32),
    )


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(value=st.one_of(st.binary(max_size=2048), _big_values()))
def test_round_trip_any_size(store, value):
    store.put("k", value, meta=META)
    assert store.get("k") == value
    e = store.entry("k")
    assert e.raw_size == len(value)
    got = store.get_entry("k")
    assert got is not None and got[0] == value and got[1].key == "k"
    # below the threshold: inline; above: a side file on disk with the stored bytes
    (file,) = store._con().execute("SELECT file FROM entries WHERE key = 'k'").fetchone()
    assert (file is None) == (e.stored_size < store.inline_threshold)


def test_metadata_round_trip_and_schema(store):
    store.put("k", b"x" * 1000, meta=META)
    e = store.entry("k")
    assert isinstance(e, Entry)
    for k, v in META.items():
        assert getattr(e, k) == v
    assert e.raw_size == 1000 and e.stored_size < 1000 and e.codec == "zstd"
    assert e.hits == 0 and e.created == e.last_used
    d = e.to_dict()
    json.dumps(d)
    schema = json.loads(files("pcache.store.schemas").joinpath("entry.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.validate(d, schema)
    assert set(d) == set(schema["properties"])
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**d, "hits": -1}, schema)


def test_meta_validation(store):
    with pytest.raises(ValueError, match="unknown meta keys"):
        store.put("k", b"v", meta={"backnd": "cpu"})
    with pytest.raises(ValueError):
        store.put("k", b"v", meta={"compile_seconds": float("nan")})
    with pytest.raises(ValueError):
        store.put("k", b"v", meta={"extra": {"x": object()}})
    with pytest.raises(TypeError):
        store.put("k", b"v", meta={"backend": 3})
    with pytest.raises(TypeError):
        store.put("k", "not bytes", meta={})
    with pytest.raises(TypeError):
        store.get(b"bytes-key")
    assert "k" not in store and len(store) == 0


def test_overwrite_delete_contains_len_clear(store):
    store.put("a", os.urandom(100_000), meta={})  # side file
    assert store._files.listing()
    store.put("a", b"2", meta={})  # overwrite: inline now, old file removed
    assert store.get("a") == b"2"
    assert not store._files.listing()
    store.put("b", b"3", meta={})
    assert "a" in store and "zz" not in store and 5 not in store
    assert len(store) == 2
    assert store.delete("a") and not store.delete("a")
    assert store.get("a") is None
    assert store.clear() == 1 and len(store) == 0
    assert store.stats()["stored_bytes"] == 0


def test_entries_filters_and_iter(store):
    for i in range(6):
        store.put(f"k{i}", bytes(i), meta={"function_name": f"f{i % 2}", "compile_seconds": i})
    assert [e.key for e in store] == [f"k{i}" for i in range(6)]
    assert [e.key for e in store.entries(function_name="f1")] == ["k1", "k3", "k5"]
    assert [e.key for e in store.entries(order_by="compile_seconds", descending=True, limit=2)] == [
        "k5",
        "k4",
    ]
    assert len(list(store.entries(order_by="eviction"))) == 6
    assert list(store.entries(older_than=3600)) == []
    with pytest.raises(ValueError):
        store.entries(order_by="extra; DROP TABLE entries")
    with pytest.raises(TypeError):
        store.entries(nonsense="x")


def _db_hits(store, key):
    con = sqlite3.connect(store._db_path)
    try:
        return con.execute("SELECT hits, last_used FROM entries WHERE key = ?", (key,)).fetchone()
    finally:
        con.close()


def test_hits_are_coalesced_not_written_per_get(tmp_path):
    s = Store(tmp_path, flush_interval=3600, flush_threshold=10_000)
    s.put("k", b"v", meta={})
    hits0, used0 = _db_hits(s, "k")
    con = s._con()
    changes = con.total_changes
    for _ in range(200):
        assert s.get("k") == b"v"
    assert s.get("missing") is None
    assert con.total_changes == changes  # no write at all for 201 gets
    assert _db_hits(s, "k") == (hits0, used0)
    st_ = s.stats()  # includes this process's pending counts
    assert st_["hits"] == 200 and st_["misses"] == 1
    s.close()  # flushes
    hits, used = _db_hits(s, "k")
    assert hits == 200 and used > used0
    with Store(tmp_path) as s2:
        st2 = s2.stats()
        assert (st2["hits"], st2["misses"], st2["puts"]) == (200, 1, 1)
        assert s2.entry("k").hits == 200


def test_flush_threshold_and_bump(tmp_path):
    with Store(tmp_path, flush_threshold=5, flush_interval=3600) as s:
        s.put("k", b"v", meta={})
        for _ in range(5):
            s.get("k")
        assert _db_hits(s, "k")[0] == 5  # threshold reached -> flushed
        s.bump({"seconds_saved": 1.5, "memory_hits": 2})
        s.bump({"seconds_saved": 2.0})
        assert s.stats()["seconds_saved"] == 3.5
        with pytest.raises(TypeError):
            s.bump({"x": "1"})
    with Store(tmp_path) as s:
        st_ = s.stats()
        assert st_["seconds_saved"] == 3.5 and st_["memory_hits"] == 2


def test_stats_sizes(store):
    store.put("small", b"a" * 1000, meta={})
    store.put("big", os.urandom(200_000), meta={})
    st_ = store.stats()
    assert st_["entries"] == 2
    assert st_["raw_bytes"] == 201_000
    assert st_["file_bytes"] == 200_000
    assert st_["stored_bytes"] == store.entry("small").stored_size + 200_000
    assert st_["disk_bytes"] >= st_["stored_bytes"]
    assert st_["puts"] == 2 and st_["max_bytes"] is None


def test_threads_share_a_store(tmp_path):
    import threading

    s = Store(tmp_path)
    errors = []

    def work(t):
        try:
            for i in range(50):
                s.put(f"{t}-{i}", f"{t}-{i}".encode(), meta={})
                assert s.get(f"{t}-{i}") == f"{t}-{i}".encode()
        except Exception as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(s) == 200
    s.close()
    with pytest.raises(StoreError):
        s.get("x")


_FORK_SCRIPT = """
import os, sys
from pcache.store import Store
s = Store(sys.argv[1])
s.put("k", b"parent", meta={})
s.get("k")  # a pending hit the child must not re-flush
pid = os.fork()
if pid == 0:  # child
    code = 1
    try:
        s.put("c", b"child", meta={})
        code = 0 if s.get("k") == b"parent" else 2
        s.close()
    finally:
        os._exit(code)
_, status = os.waitpid(pid, 0)
assert os.waitstatus_to_exitcode(status) == 0, status
assert s.get("c") == b"child"
s.close()
"""


def test_fork_gets_its_own_connection(tmp_path):
    # Forked in a fresh interpreter: this pytest process has imported JAX, whose
    # threads make os.fork() here unsafe (and warn).
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "-c", _FORK_SCRIPT, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    with Store(tmp_path) as s2:
        assert s2.entry("k").hits == 3  # parent 2 + child 1, not double-counted
        assert s2.verify().ok
