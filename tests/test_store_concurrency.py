"""Many processes on one directory, and writers killed with SIGKILL at random moments."""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import store_helpers
from pcache.store import Store

HELPER = Path(store_helpers.__file__)


@pytest.mark.timeout(180)
def test_eight_processes_mixed_ops(tmp_path):
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(8) as pool:
        results = pool.starmap(
            store_helpers.mixed_worker, [(str(tmp_path), w, 500, 1000 + w) for w in range(8)]
        )
    totals = {k: sum(r[k] for r in results) for k in results[0]}
    assert totals["put"] > 1000 and totals["hit"] > 100 and totals["gc"] > 0, totals
    with Store(tmp_path, orphan_grace=0) as s:
        assert s.stats()["hits"] == totals["hit"]  # every process flushed its hits at close
        assert s.verify().ok
        for e in s.entries():
            v = s.get(e.key)
            assert v is not None
            store_helpers.check_value(e.key, v)
        st = s.stats()
        assert st["stored_bytes"] <= 3 * 2**20
        assert st["puts"] == totals["put"]
        assert st["entries"] == len(list(s.entries()))
        assert st["stored_bytes"] == sum(e.stored_size for e in s.entries())
        gc = s.gc()
        assert gc.orphans_removed == 0 and gc.corrupt_removed == 0


@pytest.mark.timeout(180)
def test_sigkill_writers_never_leave_wrong_entries(tmp_path):
    rng = random.Random(7)
    kills = 0
    for round_ in range(50):
        # mostly one writer, sometimes two racing, killed at a random instant
        procs = [
            subprocess.Popen(
                [sys.executable, str(HELPER), "crash-writer", str(tmp_path), str(round_ * 10 + j)],
                stdout=subprocess.PIPE,
                text=True,
            )
            for j in range(1 if round_ % 5 else 2)
        ]
        try:
            for p in procs:
                assert p.stdout.readline().strip() == "ready"
            time.sleep(rng.uniform(0.0, 0.25))
            for p in procs:
                p.send_signal(signal.SIGKILL)
                kills += 1
        finally:
            for p in procs:
                p.kill()
                p.wait()
                p.stdout.close()
        assert all(p.returncode == -signal.SIGKILL for p in procs)
        if round_ % 10 == 9:
            with Store(tmp_path) as s:
                _check_all(s)
    assert kills >= 50
    with Store(tmp_path, orphan_grace=0) as s:
        _check_all(s)
        s.gc()  # sweeps crash leftovers (no writer alive, so no grace needed)
        assert s._files.listing().keys() == {
            r[0] for r in s._con().execute("SELECT file FROM entries WHERE file NOT NULL")
        }
        assert not any(n.endswith(".tmp") for n in s._files.listing())
        report = s.verify()
        assert report.ok, report
        st = s.stats()
        assert st["stored_bytes"] == sum(e.stored_size for e in s.entries())
        assert st["entries"] == len(s) > 0


def _check_all(s: Store) -> None:
    report = s.verify()
    assert not report.integrity and not report.corrupt and not report.missing, report
    for e in s.entries():
        v = s.get(e.key)
        assert v is not None, e.key
        store_helpers.check_value(e.key, v)


@pytest.mark.timeout(60)
def test_orphan_of_live_writer_is_kept_until_grace(tmp_path):
    with Store(tmp_path, inline_threshold=10) as s:
        s.put("k", os.urandom(1000), meta={})
        # a file written by a writer that has not committed yet (or crashed)
        fresh = s._files.write(b"in flight")
        old = s._files.write(b"crashed long ago")
        past = time.time() - 3600
        os.utime(s._files.path(old), (past, past))
        result = s.gc()
        assert result.orphans_removed == 1
        assert s._files.path(fresh).exists() and not s._files.path(old).exists()
        assert s.get("k") is not None
        assert s.verify().orphans == []  # fresh one is within the grace period


@pytest.mark.timeout(60)
def test_open_sweeps_orphans_when_no_gc_ran_for_a_day(tmp_path):
    import sqlite3

    with Store(tmp_path) as s:
        orphan = s._files.write(b"left by a crashed writer")
        path = s._files.path(orphan)
    past = time.time() - 7200
    os.utime(path, (past, past))
    Store(tmp_path, orphan_grace=3600).close()
    assert path.exists()  # swept less than a day ago (at creation): open leaves it
    con = sqlite3.connect(tmp_path / "store.db")
    with con:
        con.execute("UPDATE meta SET value = ? WHERE name = 'last_sweep'", (repr(past - 86400),))
    con.close()
    Store(tmp_path, orphan_grace=3600).close()
    assert not path.exists()


@pytest.mark.parametrize("size", [100, 50_000], ids=["inline", "side file"])
def test_a_value_replaced_while_it_is_read_is_never_taken_for_corrupt(tmp_path, size):
    """A reader has the row of key k; before it reads the value, another process
    replaces k. SQLite gives the new row the same rowid (the old one was the
    highest): the reader must tell the new row from the one it read, neither
    deleting it as "corrupt" nor orphaning its side file, nor returning its bytes
    as the old row's. (Found by test_eight_processes_mixed_ops, once in CI.)"""
    old, new = os.urandom(size), os.urandom(size)
    with Store(tmp_path, inline_threshold=16 * 1024) as reader, Store(tmp_path) as writer:
        reader.put("other", b"x")
        reader.put("k", old)
        replaced = []

        def replace_meanwhile(entry) -> None:
            if not replaced:
                writer.put("k", new)
                replaced.append(entry)

        got = reader.get_entry("k", verify=False, admit=replace_meanwhile)
        if got is not None:  # the bytes returned are those the returned entry describes
            assert got[0] in (old, new)
            assert hashlib.sha256(got[0]).hexdigest() == got[1].checksum.removeprefix("sha256:")
        assert reader.get("k") == new  # the replacement is still there
        with Store(tmp_path, orphan_grace=0) as s:
            result = s.verify()
            assert result.ok, result
            assert s.stats()["corrupt"] == 0
