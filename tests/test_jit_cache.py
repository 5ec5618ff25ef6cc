"""The cache in JAX's compile path, end to end, in real processes.

Compiles and lowerings are counted through `jax.monitoring` events
(`/jax/core/compile/backend_compile_duration`, `.../jaxpr_to_mlir_module_duration`);
results are compared bitwise with JAX run without pcache.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _env(env: dict[str, str] | None) -> dict[str, str]:
    full_env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("JAX_PCACHE_") or k == "JAX_PCACHE_CHECK"
    }
    full_env.update(env or {})
    return full_env


def _start(args: tuple[str, ...], env: dict[str, str] | None) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.progs", *args],
        cwd=ROOT,
        env=_env(env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _rows(proc: subprocess.Popen, timeout: float) -> list[dict]:
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, err[-4000:]
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def run_prog(*args: str, env: dict[str, str] | None = None, timeout: float = 300) -> list[dict]:
    return _rows(_start(args, env), timeout)


@pytest.fixture(scope="module")
def pattern_runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("patterns")
    # The reference (JAX alone) and the cold run are independent: side by side.
    stock = _start(("patterns", str(root / "unused"), "--no-pcache"), None)
    cold = run_prog("patterns", str(root), env={"JAX_PCACHE_RAISE_ERRORS": "1"})
    reference = _rows(stock, 300)
    warm = run_prog("patterns", str(root), env={"JAX_PCACHE_RAISE_ERRORS": "1"})
    return reference, cold, warm


def _by_key(rows):
    return {(r["pattern"], r["n"]): r for r in rows}


def test_each_pattern_compiles_once_per_process(pattern_runs):
    _, cold, _ = pattern_runs
    assert len(cold) == 3 * len({r["pattern"] for r in cold}) == 21
    for r in cold:
        assert r["compiles"] == 1, r
        # The second call traces again (by default a trace is recorded when its key
        # comes a second time), and its program is a memory hit; from the third on,
        # a re-created callable reuses that trace (then JAX's own caches, keyed on
        # that jaxpr, serve it; under JAX_PCACHE_CHECK it is traced too, and that
        # trace hits the memory tier).
        st, n = r["stats"], r["n"]
        assert st["misses"] == 1 and st["trace_hits"] == max(n - 2, 0), r
        check = os.environ.get("JAX_PCACHE_CHECK") == "1"
        assert st["memory_hits"] == (n - 1 if check else min(n - 1, 1)), r


def test_warm_process_compiles_and_lowers_nothing(pattern_runs):
    _, _, warm = pattern_runs
    for r in warm:
        assert r["compiles"] == 0, r
        assert r["lowerings"] == 0, r
        assert r["stats"]["disk_hits"] == 1, r


def test_results_bitwise_equal_to_uncached_jax(pattern_runs):
    reference, cold, warm = (_by_key(rows) for rows in pattern_runs)
    assert cold.keys() == warm.keys()
    assert set(reference) == {(p, 1) for p, _ in cold}  # JAX alone runs one step
    for (p, n), got in cold.items():
        ref = reference[p, 1]
        assert len(ref["digest"]) == 1
        assert got["digest"] == ref["digest"], (p, n)
        assert warm[p, n]["digest"] == ref["digest"], (p, n)


def test_env_var_alone_enables_the_cache(tmp_path):
    env = {"JAX_PCACHE_DIR": str(tmp_path / "c"), "JAX_PCACHE_RAISE_ERRORS": "1"}
    plain = _start(("env-only",), None)  # JAX alone: beside the first
    first = run_prog("env-only", env=env)[0]
    plain = _rows(plain, 300)[0]
    second = run_prog("env-only", env=env)[0]
    assert first["compiles"] == 1 and first["pcache_imported"]
    assert second["compiles"] == 0 and second["lowerings"] == 0
    assert plain["compiles"] == 3 and not plain["pcache_imported"]
    assert first["digest"] == second["digest"] == plain["digest"]
    disabled = run_prog("env-only", env={**env, "JAX_PCACHE_DISABLE": "1"})[0]
    assert disabled["compiles"] == 3


def test_concurrent_processes_compile_each_function_once(tmp_path):
    cache = str(tmp_path / "shared")
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("JAX_PCACHE_") or k == "JAX_PCACHE_CHECK"
    }
    env["JAX_PCACHE_RAISE_ERRORS"] = "1"
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "tests.progs", "six", cache],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    rows = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err[-3000:]
        rows.append(json.loads(out.strip().splitlines()[-1]))
    # jax.device_put of numpy inputs compiles nothing; the 6 jitted functions are
    # the only compiles, and single-flight makes each happen in one process only.
    assert sum(r["compiles"] for r in rows) == 6, [r["compiles"] for r in rows]
    assert len({tuple(r["digests"]) for r in rows}) == 1
