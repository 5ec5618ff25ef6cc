"""Ship a warm cache: time to first results of the demo's programs in a fresh
process started from an imported bundle, beside a cold start, stock JAX and a
copied directory of JAX's own persistent cache.

    .venv/bin/python scripts/bench_bundle.py

The "CI job" runs the demo's seed patterns once with pcache (cold) and exports the
cache (`pcache export --sign-key`); the "image build" imports the bundle into an
empty directory (`pcache import --verify-key`, another secret); the "first request" is a new process
over that directory. Printed per run: time to the first result of every pattern
(interpreter and imports included), the ratio to stock JAX, and backend compiles
and lowerings over all the calls the demo makes of each pattern.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "scripts" / "demo.py"
PCACHE = [sys.executable, "-m", "pcache.cli"]


def child(cache: Path, *, stock: bool = False, env_extra: dict | None = None) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("JAX_PCACHE_")}
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    env.update(env_extra or {})
    t0 = time.perf_counter()
    out = subprocess.run(
        [sys.executable, str(DEMO), "--child", str(cache), *(["--stock"] if stock else [])],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    wall = time.perf_counter() - t0
    r = json.loads(out.strip().splitlines()[-1])
    rows = r["rows"]
    return {
        # interpreter start + imports + the first call of every pattern
        "first_results_s": wall - r["total_s"] + sum(x["first_ms"] for x in rows) / 1e3,
        "compiles": sum(x["compiles"] for x in rows),
        "lowerings": sum(x["lowerings"] for x in rows),
    }


def cli(*args: str) -> float:
    t0 = time.perf_counter()
    subprocess.run([*PCACHE, *args], cwd=ROOT, check=True, capture_output=True, text=True)
    return time.perf_counter() - t0


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        rows = [("stock JAX", child(t / "unused", stock=True))]
        rows.append(("pcache, cold (the CI job)", child(t / "ci")))
        key = t / "ci.key"  # the bundle is signed and checked, as the README advises
        key.write_bytes(os.urandom(32).hex().encode())
        key.chmod(0o600)
        export_s = cli(
            "--dir", str(t / "ci"), "export", str(t / "warm.pcb"), "--all", "--sign-key", str(key)
        )  # fmt: skip
        import_s = cli(
            "--dir", str(t / "image"), "import", str(t / "warm.pcb"), "--verify-key", str(key)
        )  # fmt: skip
        rows.append(("pcache, from the bundle", child(t / "image")))
        jax_env = {
            "JAX_COMPILATION_CACHE_DIR": str(t / "jax-ci"),
            "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
            "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "0",
        }
        rows.append(("JAX cache, cold", child(t / "unused", stock=True, env_extra=jax_env)))
        shutil.copytree(t / "jax-ci", t / "jax-image")
        jax_env["JAX_COMPILATION_CACHE_DIR"] = str(t / "jax-image")
        rows.append(("JAX cache, dir copied", child(t / "unused", stock=True, env_extra=jax_env)))
        size = (t / "warm.pcb").stat().st_size
    stock = rows[0][1]["first_results_s"]
    print(f"{'run':<28}{'first results s':>16}{'vs stock':>10}{'compiles':>10}{'lowerings':>11}")
    for label, r in rows:
        print(
            f"{label:<28}{r['first_results_s']:>16.2f}{r['first_results_s'] / stock:>9.2f}x"
            f"{r['compiles']:>10}{r['lowerings']:>11}"
        )
    print(
        f"\nbundle {size / 1024:.0f} KiB; pcache export {export_s:.2f} s, import {import_s:.2f} s"
    )


if __name__ == "__main__":
    main()
