"""Eviction under max_bytes (LRU, cost-aware) and gc."""

from __future__ import annotations

import os
import random
import sqlite3

import pytest
from pcache.store import POLICIES, Store

pytestmark = pytest.mark.timeout(60)


def _age(store: Store, key: str, seconds: float) -> None:
    """Pretend ``key`` was last used ``seconds`` ago (written straight to the file)."""
    con = sqlite3.connect(store._db_path)
    with con:
        con.execute("UPDATE entries SET last_used = last_used - ? WHERE key = ?", (seconds, key))
    con.close()


def test_lru_order(tmp_path):
    with Store(tmp_path, max_bytes=5000, policy="lru") as s:
        for i in range(5):
            s.put(f"k{i}", os.urandom(1000), meta={})
        assert s.get("k0") is not None  # k0 becomes most recent (coalesced, flushed by put)
        s.put("k5", os.urandom(1000), meta={})
        assert sorted(e.key for e in s) == ["k0", "k2", "k3", "k4", "k5"]
        s.get("k2")
        s.put("k6", os.urandom(2500), meta={})  # needs 2.5 slots: k3, k4, k0 go
        assert sorted(e.key for e in s) == ["k2", "k5", "k6"]
        st = s.stats()
        assert st["stored_bytes"] <= 5000 and st["evictions"] == 4


def test_cost_aware_keeps_expensive_per_byte(tmp_path):
    with Store(tmp_path, max_bytes=4000, policy="cost") as s:
        s.put("dear", os.urandom(1000), meta={"compile_seconds": 30.0})
        s.put("cheap", os.urandom(1000), meta={"compile_seconds": 0.01})
        s.put("big", os.urandom(2000), meta={"compile_seconds": 30.0})  # half as dear per byte
        s.put("new", os.urandom(1000), meta={"compile_seconds": 1.0})
        # cheap has the lowest compile-seconds per byte although it is not the LRU entry
        assert sorted(e.key for e in s) == ["big", "dear", "new"]
        order = [e.key for e in s.entries(order_by="eviction")]
        assert order == ["new", "big", "dear"]
        # aging: an entry unused for 5 days loses 2**5 = 32x; big (0.5x of dear) unused for
        # 5 days now scores below new (1 s / 1000 B vs 30 s / 2000 B / 32)
        _age(s, "big", 5 * 86400)
        s.put("more", os.urandom(1000), meta={"compile_seconds": 1.0})
        assert sorted(e.key for e in s) == ["dear", "more", "new"]


def test_equal_costs_reduce_to_lru(tmp_path):
    with Store(tmp_path, max_bytes=3000, policy="cost") as s:
        for i in range(3):
            s.put(f"k{i}", os.urandom(1000), meta={"compile_seconds": 2.0})
        s.get("k0")
        s.put("k3", os.urandom(1000), meta={"compile_seconds": 2.0})
        assert sorted(e.key for e in s) == ["k0", "k2", "k3"]


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_total_stays_within_max_bytes(tmp_path, policy):
    rng = random.Random(policy)
    limit = 200_000
    with Store(tmp_path, max_bytes=limit, policy=policy, inline_threshold=20_000) as s:
        for i in range(150):
            size = rng.choice([10, 1000, 15_000, 40_000, 90_000])
            s.put(
                f"k{rng.randrange(60)}", rng.randbytes(size), meta={"compile_seconds": rng.random()}
            )
            st = s.stats()
            assert st["stored_bytes"] <= limit
            if i % 50 == 0:
                assert st["stored_bytes"] == sum(e.stored_size for e in s)
        assert s.verify().ok
        s.put("huge", rng.randbytes(limit + 1), meta={})  # larger than the bound: evicted too
        assert "huge" not in s and s.stats()["stored_bytes"] <= limit


def test_unknown_policy(tmp_path):
    with pytest.raises(ValueError, match="valid"):
        Store(tmp_path, policy="random")


def test_gc_selectors_dry_run_and_progress(tmp_path):
    with Store(tmp_path, inline_threshold=50_000) as s:
        for i in range(10):
            s.put(
                f"k{i}",
                os.urandom(30_000 if i < 5 else 60_000),
                meta={"backend": "gpu" if i % 2 else "cpu"},
            )
        _age(s, "k0", 7200)
        _age(s, "k2", 7200)
        dry = s.gc(older_than=3600, dry_run=True)
        assert sorted(e.key for e in dry.removed) == ["k0", "k2"] and dry.dry_run
        assert len(s) == 10
        calls = []
        res = s.gc(
            older_than=3600,
            predicate=lambda e: e.backend == "gpu" and e.key != "k9",
            progress=lambda done, total: calls.append((done, total)),
        )
        assert sorted(e.key for e in res.removed) == ["k0", "k1", "k2", "k3", "k5", "k7"]
        assert res.bytes_freed == sum(e.stored_size for e in res.removed)
        assert calls[0] == (0, 6) and calls[-1] == (6, 6)
        assert sorted(e.key for e in s) == ["k4", "k6", "k8", "k9"]
        # evict by policy down to a bound
        res = s.gc(max_bytes=130_000)
        assert s.stats()["stored_bytes"] <= 130_000 and len(res.removed) == 2
        assert s.stats()["evictions"] == 8


def test_gc_gives_disk_space_back(tmp_path):
    with Store(tmp_path) as s:
        for i in range(40):
            s.put(f"k{i}", os.urandom(100_000), meta={})  # inline
        res = s.gc(max_bytes=0)
        assert len(s) == 0 and len(res.removed) == 40
        assert res.disk_bytes_after < res.disk_bytes_before / 5, res


def test_cost_policy_orders_by_the_indexed_expression():
    """The cost policy's ORDER BY is spelled from HALF_LIFE; store.sql's index must
    be on the same expression, or eviction scans the table."""
    from pcache.store import _schema
    from pcache.store._policy import HALF_LIFE, POLICIES

    assert HALF_LIFE == 86400.0
    expr = POLICIES["cost"].order_by
    assert f"entries_cost ON entries ({expr})" in _schema.sections()["create"]
