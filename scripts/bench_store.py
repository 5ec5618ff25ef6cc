#!/usr/bin/env python
"""Benchmark pcache's store against JAX's built-in file cache (``jax._src.lru_cache.LRUCache``).

Prints Markdown tables:

1. get/put latency (p50, p99, ms) for 1 KB, 100 KB and 10 MB values, both caches;
2. gc / eviction of 100,000 entries, both caches;
3. inline blobs vs side files at several sizes (justifies ``INLINE_THRESHOLD``).

Usage: ``python scripts/bench_store.py [--quick] [--gc-entries N]``.  Runs in a few
minutes on 2 cores; ``--quick`` in well under one.  Values are half random, half
zeros (zstd halves them, roughly like XLA executables) except in table 3, which
uses incompressible bytes so both layouts store the same number of bytes.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from pcache.store import Store

KB = 1024
MB = 1024 * 1024


def _value(rng: random.Random, n: int) -> bytes:
    return rng.randbytes(n // 2) + bytes(n - n // 2)


def _pct(samples: list[float], q: float) -> float:
    s = sorted(samples)
    return s[min(len(s) - 1, int(q * len(s)))] * 1000


def _time(fn: Callable[[], object], n: int) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def _latency(make_cache, size: int, n: int, rng: random.Random) -> tuple[list[float], list[float]]:
    """Put n distinct keys, then get them in random order."""
    cache = make_cache()
    values = [_value(rng, size) for _ in range(min(n, 8))]
    keys = [f"{rng.getrandbits(128):032x}" for _ in range(n)]
    puts = []
    for i, k in enumerate(keys):
        v = values[i % len(values)]
        t0 = time.perf_counter()
        cache.put(k, v)
        puts.append(time.perf_counter() - t0)
    order = keys[:]
    rng.shuffle(order)
    gets = []
    for k in order:
        t0 = time.perf_counter()
        got = cache.get(k)
        gets.append(time.perf_counter() - t0)
        assert got is not None
    close = getattr(cache, "close", None)
    if close:
        close()
    return puts, gets


class _StoreAdapter:
    def __init__(self, path: str, **kw) -> None:
        self.s = Store(path, **kw)

    def put(self, k: str, v: bytes) -> None:
        self.s.put(k, v, meta={"backend": "cpu", "compile_seconds": 1.0})

    def get(self, k: str) -> bytes | None:
        return self.s.get(k)

    def close(self) -> None:
        self.s.close()


def _jax_cache(path: str):
    from jax._src.lru_cache import LRUCache

    # max_size != -1 turns on its LRU bookkeeping (atime files + lock), as with
    # jax_compilation_cache_max_size set; 1 TB so nothing is evicted here.
    return LRUCache(path, max_size=2**40)


def table_latency(root: Path, quick: bool) -> list[str]:
    rng = random.Random(0)
    rows = [
        "| value | cache | put p50 ms | put p99 ms | get p50 ms | get p99 ms |",
        "|---|---|---:|---:|---:|---:|",
    ]
    # JAX's put() globs the whole directory, so n puts cost O(n^2): keep n modest.
    for size, n in ((1 * KB, 500), (100 * KB, 300), (10 * MB, 10)):
        if quick:
            n = max(5, n // 10)
        for name, make in (
            ("pcache store", lambda d: _StoreAdapter(d)),
            ("jax LRUCache", _jax_cache),
        ):
            d = tempfile.mkdtemp(dir=root)
            puts, gets = _latency(lambda d=d, make=make: make(d), size, n, rng)
            shutil.rmtree(d)
            label = f"{size // MB} MB" if size >= MB else f"{size // KB} KB"
            rows.append(
                f"| {label} | {name} | {_pct(puts, 0.5):.3f} | {_pct(puts, 0.99):.3f} "
                f"| {_pct(gets, 0.5):.3f} | {_pct(gets, 0.99):.3f} |"
            )
    return rows


def _fill_store(path: str, n: int, rng: random.Random) -> Store:
    s = Store(path)
    v = _value(rng, 1 * KB)
    for i in range(n):
        s.put(
            f"{i:032x}", v, meta={"compile_seconds": (i % 100) / 10, "function_name": f"f{i % 7}"}
        )
    return s


def table_gc(root: Path, n: int) -> list[str]:
    rng = random.Random(1)
    rows = [
        f"| gc of {n:,} entries (1 KB each) | seconds | removed |",
        "|---|---:|---:|",
    ]
    d = tempfile.mkdtemp(dir=root)
    t0 = time.perf_counter()
    s = _fill_store(d, n, rng)
    fill = time.perf_counter() - t0
    rows.append(f"| pcache store: fill via put() (not gc, for scale) | {fill:.2f} | - |")

    t0 = time.perf_counter()
    res = s.gc(dry_run=True, predicate=lambda e: e.function_name == "f3")
    rows.append(
        f"| pcache store: gc(predicate=..., dry_run=True) over all | {time.perf_counter() - t0:.2f} | {len(res.removed):,} (would) |"
    )
    t0 = time.perf_counter()
    res = s.gc(predicate=lambda e: e.function_name == "f3")
    rows.append(
        f"| pcache store: gc(predicate=...) over all | {time.perf_counter() - t0:.2f} | {len(res.removed):,} |"
    )
    half = s.stats()["stored_bytes"] // 2
    t0 = time.perf_counter()
    res = s.gc(max_bytes=half)
    rows.append(
        f"| pcache store: gc(max_bytes=half), cost policy | {time.perf_counter() - t0:.2f} | {len(res.removed):,} |"
    )
    t0 = time.perf_counter()
    res = s.gc(max_bytes=0)
    rows.append(
        f"| pcache store: gc(max_bytes=0), remove everything left | {time.perf_counter() - t0:.2f} | {len(res.removed):,} |"
    )
    s.close()
    shutil.rmtree(d)

    # JAX: its eviction runs inside put(): glob every entry, read every atime file,
    # heap-sort, unlink.  Fill the directory the way its put() does (value file +
    # atime file), without paying its O(n) glob on each of the n puts.
    from jax._src.lru_cache import _ATIME_SUFFIX, _CACHE_SUFFIX, LRUCache

    d = Path(tempfile.mkdtemp(dir=root))
    v = _value(rng, 1 * KB)
    t0 = time.perf_counter()
    for i in range(n):
        (d / f"{i:032x}{_CACHE_SUFFIX}").write_bytes(v)
        (d / f"{i:032x}{_ATIME_SUFFIX}").write_bytes(time.time_ns().to_bytes(8, "little"))
    fill = time.perf_counter() - t0
    rows.append(f"| jax LRUCache: fill (files written directly) | {fill:.2f} | - |")
    cache = LRUCache(str(d), max_size=(n // 2) * len(v))
    t0 = time.perf_counter()
    cache.put("trigger", v)  # evicts down to half
    dt = time.perf_counter() - t0
    left = sum(1 for _ in d.glob(f"*{_CACHE_SUFFIX}"))
    rows.append(f"| jax LRUCache: put() that evicts to half | {dt:.2f} | {n + 1 - left:,} |")
    t0 = time.perf_counter()
    cache.put("trigger2", v)  # no eviction needed, but it scans anyway
    rows.append(
        f"| jax LRUCache: next put() (scans {left:,} entries again) | {time.perf_counter() - t0:.2f} | 0 |"
    )
    shutil.rmtree(d)
    return rows


def table_threshold(root: Path, quick: bool) -> list[str]:
    rng = random.Random(2)
    rows = [
        "| stored size | get inline p50 ms | get side file p50 ms | put inline p50 ms | put side file p50 ms |",
        "|---|---:|---:|---:|---:|",
    ]
    for size in (16 * KB, 64 * KB, 128 * KB, 256 * KB, 1 * MB, 4 * MB):
        n = max(8, min(300, (32 * MB) // size))
        if quick:
            n = max(5, n // 5)
        cells = {}
        for layout, threshold in (("inline", 2**62), ("file", 0)):
            d = tempfile.mkdtemp(dir=root)
            s = Store(d, inline_threshold=threshold)
            vals = [rng.randbytes(size) for _ in range(4)]
            keys = [f"k{i}" for i in range(n)]
            puts = []
            for i, k in enumerate(keys):
                t0 = time.perf_counter()
                s.put(k, vals[i % 4], meta={})
                puts.append(time.perf_counter() - t0)
            gets = _time(lambda s=s, keys=keys: s.get(rng.choice(keys)), n)
            cells[layout] = (statistics.median(gets) * 1000, statistics.median(puts) * 1000)
            s.close()
            shutil.rmtree(d)
        label = f"{size // MB} MiB" if size >= MB else f"{size // KB} KiB"
        rows.append(
            f"| {label} | {cells['inline'][0]:.3f} | {cells['file'][0]:.3f} "
            f"| {cells['inline'][1]:.3f} | {cells['file'][1]:.3f} |"
        )
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="fewer iterations, 10,000-entry gc")
    p.add_argument("--gc-entries", type=int, default=None, help="entries for the gc table")
    p.add_argument("--dir", default=None, help="scratch directory (default: a temp dir)")
    args = p.parse_args()
    n_gc = args.gc_entries or (10_000 if args.quick else 100_000)
    root = Path(tempfile.mkdtemp(prefix="pcache-bench-", dir=args.dir))
    try:
        print(f"## get/put latency (pcache store vs jax LRUCache), {os.cpu_count()} CPUs\n")
        print("\n".join(table_latency(root, args.quick)))
        print(f"\n## gc of {n_gc:,} entries\n")
        print("\n".join(table_gc(root, n_gc)))
        print("\n## inline blob vs side file (incompressible values, fsync on)\n")
        print("\n".join(table_threshold(root, args.quick)))
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
