#!/usr/bin/env python
"""A short tour of pcache's store (no JAX needed): write, read, evict, inspect.

Usage: ``python scripts/demo_store.py [DIRECTORY]`` (default: a temp directory,
removed afterwards).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time

from pcache.store import Store


def _mb(n: int) -> str:
    return f"{n / 2**20:.2f} MB"


def main() -> None:
    keep = len(sys.argv) > 1
    directory = sys.argv[1] if keep else tempfile.mkdtemp(prefix="pcache-store-demo-")
    try:
        with Store(directory, max_bytes=4 * 2**20, policy="cost") as s:
            print(f"store at {directory}  (max_bytes {_mb(s.max_bytes)}, policy {s.policy.name})\n")
            # Fake "executables": half random, half zeros, 200 KB to 3 MB; the compile
            # time we pretend each took drives cost-aware eviction.
            sizes = [200_000, 600_000, 1_500_000, 3_000_000, 800_000, 2_500_000, 3_000_000]
            for i, size in enumerate(sizes):
                value = os.urandom(size // 2) + bytes(size - size // 2)
                t0 = time.perf_counter()
                s.put(
                    f"exe-{i}",
                    value,
                    meta={
                        "backend": "cpu",
                        "function_name": f"step_{i}",
                        "compile_seconds": 0.5 + 3 * (i % 3),
                    },
                )
                dt = (time.perf_counter() - t0) * 1000
                e = s.entry(f"exe-{i}")
                if e is None:  # cost policy: the cheapest bytes per compile-second go first
                    print(f"put exe-{i}: {_mb(size)}, {dt:.1f} ms, evicted at once (lowest value)")
                    continue
                where = "side file" if e.stored_size >= s.inline_threshold else "inline"
                print(
                    f"put exe-{i}: {_mb(e.raw_size)} -> {_mb(e.stored_size)} stored ({where}), "
                    f"compile {e.compile_seconds:.1f}s, {dt:.1f} ms"
                )
            print()
            for i in range(len(sizes)):
                t0 = time.perf_counter()
                v = s.get(f"exe-{i}")
                dt = (time.perf_counter() - t0) * 1000
                print(
                    f"get exe-{i}: {'hit ' + _mb(len(v)) if v is not None else 'miss (evicted)'} in {dt:.2f} ms"
                )
            st = s.stats()
            print(
                f"\n{st['entries']} entries, {_mb(st['raw_bytes'])} raw, {_mb(st['stored_bytes'])} stored, "
                f"{_mb(st['disk_bytes'])} on disk; puts {st['puts']}, hits {st['hits']}, "
                f"misses {st['misses']}, evictions {st['evictions']}"
            )
            print("\neviction order now (first goes first):")
            for e in s.entries(order_by="eviction"):
                print(f"  {e.key}: {e.compile_seconds:.1f}s compile / {_mb(e.stored_size)}")
            t0 = time.perf_counter()
            res = s.gc(max_bytes=2 * 2**20)
            print(
                f"\ngc(max_bytes=2 MB): removed {[e.key for e in res.removed]}, freed "
                f"{_mb(res.bytes_freed)}, disk {_mb(res.disk_bytes_before)} -> "
                f"{_mb(res.disk_bytes_after)} in {(time.perf_counter() - t0) * 1000:.1f} ms"
            )
            report = s.verify()
            print(f"verify: {'ok' if report.ok else report} ({report.checked} entries checked)")
    finally:
        if not keep:
            shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()
