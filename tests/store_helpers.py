"""Helpers for the store tests: self-describing values and subprocess workers.

Run as a script, this module is a worker process (see ``main``); tests start it
with ``subprocess`` so they can kill it at random moments.
"""

from __future__ import annotations

import hashlib
import os
import random
import sqlite3
import sys
import time

# A value is ``b"PCV1|<key>|<version>|<size>|" + body``; body is a deterministic
# function of (key, version, size), half random and half repeated (so zstd finds
# something to compress in some of them).  A reader can check it was written by
# some put of exactly that key.
_MAGIC = b"PCV1|"


def make_value(key: str, version: str, size: int) -> bytes:
    rng = random.Random(f"{key}|{version}|{size}")
    half = rng.randbytes(size // 2)
    body = half + (half if rng.random() < 0.5 else rng.randbytes(size - size // 2))
    return _MAGIC + f"{key}|{version}|{size}|".encode() + body[:size]


def check_value(key: str, value: bytes) -> str:
    """Return the version embedded in ``value``; raise AssertionError if it is not a
    value some put of ``key`` wrote."""
    assert value.startswith(_MAGIC), value[:40]
    _, k, version, size, _ = value.split(b"|", 4)
    assert k.decode() == key, (k, key)
    assert value == make_value(key, version.decode(), int(size)), f"{key} v{version} corrupt"
    return version.decode()


# The version-1 schema (what pcache 0.0 wrote), kept verbatim to test migration.
V1_DDL = """
CREATE TABLE entries (
    id              INTEGER PRIMARY KEY,
    key             TEXT    NOT NULL UNIQUE,
    backend         TEXT    NOT NULL DEFAULT '',
    device_kind     TEXT    NOT NULL DEFAULT '',
    jax_version     TEXT    NOT NULL DEFAULT '',
    jaxlib_version  TEXT    NOT NULL DEFAULT '',
    function_name   TEXT    NOT NULL DEFAULT '',
    raw_size        INTEGER NOT NULL,
    stored_size     INTEGER NOT NULL,
    compile_seconds REAL    NOT NULL DEFAULT 0,
    created         REAL    NOT NULL,
    last_used       REAL    NOT NULL,
    hits            INTEGER NOT NULL DEFAULT 0,
    codec           TEXT    NOT NULL,
    checksum        TEXT    NOT NULL,
    extra           TEXT    NOT NULL DEFAULT '{}',
    file            TEXT
);
CREATE TABLE blobs (id INTEGER PRIMARY KEY, data BLOB NOT NULL);
CREATE TABLE totals (
    id           INTEGER PRIMARY KEY CHECK (id = 0),
    entries      INTEGER NOT NULL DEFAULT 0,
    raw_bytes    INTEGER NOT NULL DEFAULT 0,
    stored_bytes INTEGER NOT NULL DEFAULT 0
);
INSERT INTO totals (id) VALUES (0);
CREATE TABLE counters (name TEXT PRIMARY KEY, value NUMERIC NOT NULL DEFAULT 0) WITHOUT ROWID;
CREATE INDEX entries_last_used ON entries (last_used);
CREATE TRIGGER entries_ai AFTER INSERT ON entries BEGIN
    UPDATE totals SET entries = entries + 1, raw_bytes = raw_bytes + NEW.raw_size,
        stored_bytes = stored_bytes + NEW.stored_size WHERE id = 0;
END;
CREATE TRIGGER entries_ad AFTER DELETE ON entries BEGIN
    UPDATE totals SET entries = entries - 1, raw_bytes = raw_bytes - OLD.raw_size,
        stored_bytes = stored_bytes - OLD.stored_size WHERE id = 0;
    DELETE FROM blobs WHERE id = OLD.id;
END;
CREATE TRIGGER entries_au AFTER UPDATE OF raw_size, stored_size ON entries BEGIN
    UPDATE totals SET raw_bytes = raw_bytes - OLD.raw_size + NEW.raw_size,
        stored_bytes = stored_bytes - OLD.stored_size + NEW.stored_size WHERE id = 0;
END;
PRAGMA user_version = 1;
"""


def build_v1_store(directory: str, values: dict[str, bytes]) -> None:
    """Write a version-1 store by hand (zstd values inline, as v1 did)."""
    import zstandard

    os.makedirs(directory, exist_ok=True)
    con = sqlite3.connect(os.path.join(directory, "store.db"), isolation_level=None)
    con.executescript(V1_DDL)
    now = time.time()
    for i, (key, raw) in enumerate(values.items()):
        stored = zstandard.ZstdCompressor(level=3, write_content_size=True).compress(raw)
        digest = "blake2b-128:" + hashlib.blake2b(raw, digest_size=16).hexdigest()
        cur = con.execute(
            "INSERT INTO entries (key, backend, function_name, raw_size, stored_size,"
            " compile_seconds, created, last_used, codec, checksum, extra)"
            " VALUES (?, 'cpu', ?, ?, ?, ?, ?, ?, 'zstd', ?, '{\"v\": 1}')",
            (key, f"f{i}", len(raw), len(stored), 1.0 + i, now - 100 + i, now - 100 + i, digest),
        )
        con.execute("INSERT INTO blobs (id, data) VALUES (?, ?)", (cur.lastrowid, stored))
    con.close()


# ----------------------------------------------------------------------------- workers


def mixed_worker(directory: str, worker: int, ops: int, seed: int) -> dict:
    """``ops`` random put/get/delete/gc on 40 shared keys; checks every value read."""
    from pcache.store import Store

    rng = random.Random(seed)
    counts = {"put": 0, "get": 0, "hit": 0, "delete": 0, "gc": 0}
    with Store(directory, inline_threshold=16 * 1024, max_bytes=3 * 2**20, busy_timeout=60) as s:
        for i in range(ops):
            key = f"k{rng.randrange(40)}"
            r = rng.random()
            if r < 0.45:
                size = rng.choice([0, 10, 300, 5000, 20_000, 70_000, 200_000])
                s.put(key, make_value(key, f"{worker}.{i}", size), meta={"compile_seconds": r})
                counts["put"] += 1
            elif r < 0.9:
                v = s.get(key)
                counts["get"] += 1
                if v is not None:
                    check_value(key, v)
                    counts["hit"] += 1
            elif r < 0.99:
                s.delete(key)
                counts["delete"] += 1
            else:
                s.gc(max_bytes=2**20)
                counts["gc"] += 1
    return counts


def _crash_writer(directory: str, seed: int) -> None:
    """Put/overwrite/delete forever; the test SIGKILLs us at a random moment."""
    from pcache.store import Store

    rng = random.Random(seed)
    s = Store(directory, inline_threshold=8 * 1024, max_bytes=4 * 2**20)
    print("ready", flush=True)
    parent = os.getppid()
    i = 0
    while True:
        i += 1
        if os.getppid() != parent:  # the test runner died: don't run on as an orphan
            os._exit(0)
        key = f"k{rng.randrange(30)}"
        r = rng.random()
        if r < 0.75:
            size = rng.choice([1, 100, 4000, 12_000, 50_000, 300_000])
            s.put(key, make_value(key, f"{seed}.{i}", size), meta={"compile_seconds": r})
        elif r < 0.85:
            s.delete(key)
        elif r < 0.97:
            v = s.get(key)
            if v is not None:
                check_value(key, v)
        else:
            s.gc()


def _hold_write_lock(directory: str, seconds: float) -> None:
    con = sqlite3.connect(os.path.join(directory, "store.db"), isolation_level=None)
    con.execute("BEGIN IMMEDIATE")
    print("locked", flush=True)
    time.sleep(seconds)


def _hold_file_lock(directory: str, seconds: float) -> None:
    import filelock

    with filelock.FileLock(os.path.join(directory, "store.lock")):
        print("locked", flush=True)
        time.sleep(seconds)


def _as_nobody(action: str, directory: str) -> None:
    """Drop root, then try to use a store we may not write; print the outcome."""
    import filelock  # noqa: F401  (import everything first: the install may be root-only)
    from pcache.store import Store, StoreError

    os.setgid(65534)
    os.setuid(65534)

    try:
        with Store(directory) as s:
            if action == "put":
                s.put("k", b"v")
        print("ok")
    except StoreError as exc:
        print(type(exc).__name__, isinstance(exc, PermissionError), exc)


def _fsize_limited_put(directory: str, limit: int, size: int) -> None:
    import resource
    import signal

    from pcache.store import Store, StoreError

    s = Store(directory, inline_threshold=1024)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # get EFBIG instead of being killed
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    try:
        s.put("big", os.urandom(size))
        print("ok")
    except StoreError as exc:
        print(type(exc).__name__, isinstance(exc, OSError), exc)


def main(argv: list[str]) -> None:
    cmd, directory, *rest = argv
    if cmd == "crash-writer":
        _crash_writer(directory, int(rest[0]))
    elif cmd == "hold-write-lock":
        _hold_write_lock(directory, float(rest[0]))
    elif cmd == "hold-file-lock":
        _hold_file_lock(directory, float(rest[0]))
    elif cmd == "as-nobody":
        _as_nobody(rest[0], directory)
    elif cmd == "fsize-limited-put":
        _fsize_limited_put(directory, int(rest[0]), int(rest[1]))
    else:
        raise SystemExit(f"unknown command {cmd}")


if __name__ == "__main__":
    main(sys.argv[1:])
