#!/usr/bin/env python3
"""Prove pcache on this machine's JAX backend (CPU, GPU, ...), in fresh processes.

    .venv/bin/python scripts/backend_check.py [--platform cuda] [--dir DIR] [--json OUT]

Runs the seed patterns (`tests/progs.py`) and programs that reach a backend's own
kernels and host callbacks (a Cholesky solve, a scan, bf16 matmuls, a donated
buffer, `pure_callback`), each through a jit re-created on every call, in:

    stock        JAX without pcache
    cold, warm   the env-var path (JAX_PCACHE_DIR), an empty then a warm cache
    enable       `pcache.enable(DIR)` on the warm cache, in code
    persist-A/B  JAX_PCACHE_TRACE_PERSIST=1 on a new cache, twice

and checks: every result bitwise equal to stock; no backend compile in the warm
processes; traces served to persist-B; every stored entry names this backend and
device kind; `pcache verify` clean. Prints one line per check, exits 1 if any
fails. Absolute times are noise; the counts are the claim.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _programs(jax, jnp, np):
    """Programs beyond the seed patterns, each a new jit per call."""
    spd = np.eye(32, dtype=np.float32) * 4 + np.full((32, 32), 0.5, np.float32)

    def cholesky(x, w):
        return jax.jit(lambda a: jnp.linalg.cholesky(a + spd))(x[:32, :32] * 0.1)

    def scan(x, w):
        body = lambda c, r: (c * 0.9 + r, jnp.tanh(c))  # noqa: E731
        return jax.jit(lambda a: jax.lax.scan(body, a[0], a))(x)

    def bf16(x, w):
        f = lambda a, b: (a.astype(jnp.bfloat16) @ b.astype(jnp.bfloat16)).sum(0)  # noqa: E731
        return jax.jit(f)(x, w)

    def donate(x, w):
        return jax.jit(lambda a: a * 2.0 + 1.0, donate_argnums=0)(x + 0.0)

    def callback(x, w):
        host = functools.partial(np.sin)
        spec = jax.ShapeDtypeStruct(x.shape, x.dtype)
        return jax.jit(lambda a: jax.pure_callback(host, spec, a) * 2.0)(x)

    return dict(cholesky=cholesky, scan=scan, bf16=bf16, donate=donate, callback=callback)


def child(use_enable: str | None) -> None:
    sys.path.insert(0, str(ROOT))
    import jax
    import jax.numpy as jnp
    import numpy as np

    from tests import progs

    seconds = {"trace": 0.0}

    def trace_listener(name, secs, **kw):
        if name == "/jax/core/compile/jaxpr_trace_duration":
            seconds["trace"] += secs

    jax.monitoring.register_event_duration_secs_listener(trace_listener)
    if use_enable:
        import pcache

        pcache.enable(use_enable)
    x, w = progs.inputs()
    programs = {**progs.PATTERNS, **_programs(jax, jnp, np)}
    on = bool(use_enable or os.environ.get("JAX_PCACHE_DIR"))
    if on:
        import pcache
    digests, served = {}, []
    for name, step in programs.items():
        before = pcache.stats().get("trace_persist_hits", 0) if on else 0
        outs = [step(x, w) for _ in range(2)]  # a re-created jit, twice
        digests[name] = sorted({progs.digest(o) for o in outs})
        if on and pcache.stats().get("trace_persist_hits", 0) > before:
            served.append(name)
    stats = pcache.stats() if on else {}
    dev = jax.devices()[0]
    out = dict(
        platform=dev.platform,
        device_kind=dev.device_kind,
        jax=jax.__version__,
        digests=digests,
        compiles=progs.COUNTS["compile"],
        lowerings=progs.COUNTS["lower"],
        trace_seconds=seconds["trace"],
        served=served,
        stats=stats,
    )
    print(json.dumps(out))


def _run(env: dict, *extra: str) -> dict:
    proc = subprocess.run(
        [sys.executable, __file__, "--child", *extra],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr[-4000:])
        raise SystemExit(f"child {extra} failed with exit code {proc.returncode}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _cli(*args: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "pcache", *args]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--platform", help="JAX_PLATFORMS for every process (default: JAX's choice)")
    ap.add_argument("--dir", help="where the caches go (default: a new temporary directory)")
    ap.add_argument("--json", help="write every process's report here")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--enable", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.enable)
        return 0
    root = Path(args.dir or tempfile.mkdtemp(prefix="pcache-backend-"))
    shutil.rmtree(root, ignore_errors=True)
    base = {k: v for k, v in os.environ.items() if not k.startswith("JAX_PCACHE_")}
    if args.platform:
        base["JAX_PLATFORMS"] = args.platform
    warm_dir, persist_dir = str(root / "env"), str(root / "persist")
    persist = {**base, "JAX_PCACHE_DIR": persist_dir, "JAX_PCACHE_TRACE_PERSIST": "1"}
    runs = {}
    for phase, env, extra in [
        ("stock", base, ()),
        ("cold", {**base, "JAX_PCACHE_DIR": warm_dir}, ()),
        ("warm", {**base, "JAX_PCACHE_DIR": warm_dir}, ()),
        ("enable", base, ("--enable", warm_dir)),
        ("persist-A", persist, ()),
        ("persist-B", persist, ()),
    ]:
        print(f"running {phase} ...", flush=True)
        runs[phase] = _run(env, *extra)
    stock = runs["stock"]
    print(f"\nbackend: {stock['platform']} ({stock['device_kind']}), JAX {stock['jax']}\n")
    print(f"{'process':<11}{'compiles':>9}{'lowerings':>10}{'trace s':>9}  pcache counters")
    for phase, r in runs.items():
        s = r["stats"]
        keys = ("trace_hits", "trace_persist_hits", "memory_hits", "disk_hits", "compiles")
        counters = ", ".join(f"{k} {s[k]}" for k in keys if k in s)
        print(f"{phase:<11}{r['compiles']:>9}{r['lowerings']:>10}{r['trace_seconds']:>9.2f}  {counters}")  # fmt: skip

    checks = []
    for phase, r in runs.items():
        bad = sorted(k for k, d in r["digests"].items() if d != stock["digests"][k] or len(d) != 1)
        checks.append((f"{phase}: every result bitwise equal to stock", not bad, bad))
    for phase in ("warm", "enable", "persist-B"):
        checks.append((f"{phase}: no backend compile", runs[phase]["compiles"] == 0, runs[phase]["compiles"]))  # fmt: skip
    b = runs["persist-B"]
    served = b["stats"].get("trace_persist_hits", 0)
    checks.append(("persist-B: traces served from persist-A", served >= len(stock["digests"]) - 2, served))  # fmt: skip
    for d in (warm_dir, persist_dir):
        ls = _cli("--dir", d, "ls", "--json")
        rows = json.loads(ls.stdout) if ls.returncode == 0 else []
        exe = [r for r in rows if r.get("kind", "exe") == "exe"]
        kinds = sorted({(r.get("backend"), r.get("device_kind")) for r in exe})
        want = [(stock["platform"], stock["device_kind"])]
        checks.append((f"{d}: {len(exe)} executables, all for this backend", bool(exe) and kinds == want, kinds))  # fmt: skip
        v = _cli("--dir", d, "verify")
        checks.append((f"{d}: pcache verify", v.returncode == 0, v.stdout.strip()[-300:]))
    print()
    for what, ok, detail in checks:
        print(f"{'PASS' if ok else 'FAIL'}  {what}" + ("" if ok else f"  ({detail})"))
    if args.json:
        Path(args.json).write_text(
            json.dumps({"runs": runs, "checks": checks}, indent=1, default=str)
        )
    return 0 if all(ok for _, ok, _ in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
