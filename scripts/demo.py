#!/usr/bin/env python3
"""pcache demo: the seed patterns cold, then warm in a fresh process.

    python3 scripts/dev.py demo            # via the bootstrap (creates .venv)
    .venv/bin/python scripts/demo.py [--dir DIR]

Each process runs patterns that stock JAX recompiles on every call (a re-created
`jit(grad(f))`, `value_and_grad(checkpoint(g))` around a jitted function, a new
lambda / partial / nested def per step, AOT lower+compile) with pcache enabled,
and reports per-pattern time, backend compiles and pcache's counters.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STEPS = 20


def child(cache_dir: str, use_pcache: bool = True) -> None:
    sys.path.insert(0, str(ROOT))
    t_import = time.perf_counter()
    import jax

    import pcache
    from tests import progs  # the same seed patterns the tests check

    if use_pcache:
        pcache.enable(cache_dir)
    x, w = progs.inputs()
    rows = []
    t_start = time.perf_counter()
    for name, step in progs.PATTERNS.items():
        progs.COUNTS.update(compile=0, lower=0)
        t0 = time.perf_counter()
        jax.block_until_ready(step(x, w))
        first = time.perf_counter() - t0
        t0 = time.perf_counter()
        for _ in range(STEPS):
            jax.block_until_ready(step(x, w))
        per_call = (time.perf_counter() - t0) / STEPS
        rows.append(
            dict(
                pattern=name,
                first_ms=first * 1e3,
                per_call_ms=per_call * 1e3,
                compiles=progs.COUNTS["compile"],
                lowerings=progs.COUNTS["lower"],
            )
        )
    total = time.perf_counter() - t_start
    s = pcache.stats() if use_pcache else {}
    print(json.dumps(dict(rows=rows, total_s=total, import_s=t_start - t_import, stats=s)))


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--dir", default=str(ROOT / ".pcache-demo"), help="cache directory (emptied first)"
    )
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--stock", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child, use_pcache=not args.stock)
        return
    shutil.rmtree(args.dir, ignore_errors=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("JAX_PCACHE_")}
    runs = {}
    for phase in ("stock", "cold", "warm"):
        what = "without pcache" if phase == "stock" else f"{phase} cache at {args.dir}"
        print(f"running the seed patterns in a fresh process ({what}) ...", flush=True)
        extra = ["--stock"] if phase == "stock" else []
        out = subprocess.run(
            [sys.executable, __file__, "--child", args.dir, *extra],
            env=env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        runs[phase] = json.loads(out.strip().splitlines()[-1])
    stock = runs.pop("stock")
    cold, warm = runs["cold"], runs["warm"]
    print()
    print(
        f"{'pattern':<22}{'stock/call':>11}{'pcache/call':>12}{'cold 1st':>10}{'warm 1st':>10}"
        f"{'compiles stock/cold/warm':>26}{'lowerings warm':>16}"
    )
    for st, c, w in zip(stock["rows"], cold["rows"], warm["rows"], strict=True):
        print(
            f"{c['pattern']:<22}{st['per_call_ms']:>8.2f} ms{w['per_call_ms']:>9.2f} ms"
            f"{c['first_ms']:>7.1f} ms{w['first_ms']:>7.1f} ms"
            f"{st['compiles']:>14} / {c['compiles']} / {w['compiles']:<6}{w['lowerings']:>14}"
        )
    print()
    print(
        f"all patterns, {STEPS + 1} calls each: stock JAX {stock['total_s']:.2f} s, "
        f"pcache cold {cold['total_s']:.2f} s, warm {warm['total_s']:.2f} s "
        f"({stock['total_s'] / warm['total_s']:.1f}x faster than stock)"
    )
    for phase, r in runs.items():
        s = r["stats"]
        print(
            f"{phase}: trace hits {s.get('trace_hits', 0)}, memory hits {s['memory_hits']}, "
            f"disk hits {s['disk_hits']} "
            f"(preloaded {s.get('preload_hits', 0)}), misses {s['misses']}, "
            f"compiles {s['compiles']}, bytes written {s['bytes_written']}, "
            f"compile seconds saved {s['seconds_saved']:.2f}"
        )
    print(f"\ninspect the cache:  .venv/bin/pcache --dir {args.dir} stats   (or ls, verify, gc)")


if __name__ == "__main__":
    main()
