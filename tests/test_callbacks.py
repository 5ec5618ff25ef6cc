"""Programs with host callbacks are stored, and every hit runs the caller's own
callbacks (issue 12, item 3).

The executable XLA compiles for a callback program holds no Python: the module
calls a host callback by its index, and JAX passes the Python functions when it
compiles or deserializes. pcache stores such an executable; a hit lowers the
program again (only lowering registers this call's callbacks), checks that the
module is the one compiled, and deserializes the executable bound to them.

Real subprocesses (tests/callback_prog.py, which never imports pcache), results and
raised errors compared with stock JAX, compile counts through `jax.monitoring`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
import pytest

import pcache
from tests import zygote

ROOT = Path(__file__).resolve().parents[1]
PROG = ROOT / "tests" / "callback_prog.py"


def run(cache: Path | None, *argv: str) -> tuple[list[str], dict]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("JAX_PCACHE_") or k == "JAX_PCACHE_CHECK"
    }
    if cache is not None:
        env["JAX_PCACHE_DIR"] = str(cache)
        env["JAX_PCACHE_RAISE_ERRORS"] = "1"
        env["JAX_PCACHE_TRACE_RECORD_AFTER"] = "1"
    proc = zygote.run([str(PROG), *argv], env, ROOT, 300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    *printed, last = proc.stdout.splitlines()
    return printed, json.loads(last)


@pytest.fixture(scope="module")
def stock() -> tuple[list[str], dict]:
    return run(None, "2")


def same_behaviour(a, b) -> None:
    """Same results and raised errors, same debug output, same callback records."""
    assert a[1]["results"] == b[1]["results"]
    assert a[0] == b[0]
    assert a[1]["seen"] == b[1]["seen"]


def test_a_warm_process_compiles_no_callback_program(tmp_path, stock):
    cache = tmp_path / "cache"
    cold = run(cache, "2")
    same_behaviour(cold, stock)
    st = cold[1]["stats"]
    assert st["bypasses"] == 0 and st["nonpersistent"] == 0, (
        st["bypass_reasons"],
        st["nonpersistent_reasons"],
    )
    # Each program once: the second call of each re-created wrapper is a memory hit.
    assert cold[1]["compiles"] == len(stock[1]["results"]) < stock[1]["compiles"]
    warm = run(cache, "2")
    same_behaviour(warm, stock)
    assert warm[1]["compiles"] == 0
    assert warm[1]["stats"]["disk_hits"] == len(stock[1]["results"])
    # The raised errors are there to compare: a host callback that raises, and an
    # equinox runtime check that fails (under jax.jit and eqx.filter_jit).
    results = stock[1]["results"]
    assert results["raising"].startswith("JaxRuntimeError") and "factor 2.0" in results["raising"]
    for name in ("eqx_raises", "eqx_filter_jit"):
        assert "(factor 2.0)" in results[name], results[name]
    assert stock[0] == ["debug.print v0=0.0"] * 2


@pytest.mark.parametrize("argv", [("5",), ("2", "code")], ids=["closure", "code"])
def test_a_changed_callback_runs_the_new_function(tmp_path, stock, argv):
    """A callback's function is never part of what is compiled: a warm process
    whose callbacks changed (a closure value, or the function's code) reuses the
    executables and runs its own functions, exactly as stock JAX runs them."""
    cache = tmp_path / "cache"
    run(cache, "2")
    changed_stock = run(None, *argv)
    changed = run(cache, *argv)
    same_behaviour(changed, changed_stock)
    assert changed[1]["compiles"] == 0
    differ = {k for k in stock[1]["results"] if stock[1]["results"][k] != changed[1]["results"][k]}
    if argv == ("5",):  # every callback says the factor
        assert differ == {"pure", "raising", "eqx_raises", "eqx_filter_jit"}, differ
        assert changed[1]["seen"] != stock[1]["seen"]
    else:
        assert differ == {"pure"}, differ


# -- in process ------------------------------------------------------------------------


@pytest.fixture
def cache(tmp_path):
    path = pcache.enable(tmp_path / "cache", raise_errors=True)
    yield path
    pcache.disable()


COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"
_COUNT = {"n": 0}


def _listener(name, secs, **kw):
    if name == COMPILE_EVENT:
        _COUNT["n"] += 1


jax.monitoring.register_event_duration_secs_listener(_listener)


class Compiles:
    @property
    def n(self) -> int:
        return _COUNT["n"] - self.start

    def __init__(self) -> None:
        self.start = _COUNT["n"]


@pytest.fixture
def compiles():
    return Compiles()


def test_debug_print_in_a_recreated_wrapper_hits_and_prints(cache, compiles, capfd):
    x = np.arange(4.0, dtype=np.float32)

    def step(k):
        def f(v):
            jax.debug.print("k={k} v={v}", k=k, v=v)
            return v * k

        return jax.jit(f)

    outs = []
    for _ in range(3):
        outs.append(np.asarray(step(2.0)(x)))
        jax.effects_barrier()
    assert compiles.n == 1 and pcache.stats()["memory_hits"] == 2
    assert capfd.readouterr().out.splitlines() == ["k=2.0 v=[0. 1. 2. 3.]"] * 3
    assert all(o.tobytes() == (np.arange(4.0, dtype=np.float32) * 2).tobytes() for o in outs)
    key = pcache.key(step(2.0), x)
    assert key.persistent


def test_one_key_two_modules_are_two_programs(cache, compiles):
    """The key of a callback program names slots, so two programs can share it and
    still lower to different modules (one inner jit called twice, or two inner jits
    with different callbacks): the module completes the key, so each is stored
    under its own, and each hit binds its own callbacks."""
    x = np.arange(4.0, dtype=np.float32)

    def make(k):
        def host(v):
            return (np.asarray(v) * k).astype(np.float32)

        return jax.jit(lambda v: jax.pure_callback(host, jax.ShapeDtypeStruct((4,), v.dtype), v))

    def shared(v):
        g = make(2.0)
        return g(g(v))

    def separate(v):
        return make(2.0)(make(3.0)(v))

    assert pcache.key(shared, x).digest == pcache.key(separate, x).digest
    for _ in range(3):  # re-created each time: memory hits after the first round
        assert np.asarray(jax.jit(lambda v: shared(v))(x)).tolist() == [0.0, 4.0, 8.0, 12.0]
        assert np.asarray(jax.jit(lambda v: separate(v))(x)).tolist() == [0.0, 6.0, 12.0, 18.0]
    assert compiles.n == 2
    st = pcache.stats()
    assert st["memory_hits"] == 4 and not st["bypass_reasons"]


STATEFUL_RULE = """
import json, sys, numpy as np, jax, jax.numpy as jnp
from jax.extend.core import Primitive
from jax.interpreters import mlir
n = {"c": 0}
jax.monitoring.register_event_duration_secs_listener(
    lambda name, s, **k: n.__setitem__("c", n["c"] + (name == "/jax/core/compile/backend_compile_duration")))
p = Primitive("pcache_test_random_rule")
p.def_abstract_eval(lambda x: x)
def impl(x):  # what it lowers to is drawn from numpy's RNG when it is traced
    return x + np.float32(np.random.randint(0, 1000))
mlir.register_lowering(p, mlir.lower_fun(impl, multiple_results=False))
np.random.seed(int(sys.argv[1]))
x = np.zeros(2, np.float32)
out = [np.asarray(jax.jit(lambda v: p.bind(v))(x)).tolist() for _ in range(2)]
print(json.dumps({"out": out, "compiles": n["c"], "draw": int(np.random.randint(0, 1000))}))
"""


@pytest.mark.parametrize("seed", ["0", "1"])
def test_a_lower_fun_rule_is_keyed_by_what_it_lowers_to(tmp_path, seed):
    """`mlir.lower_fun(f)` over user code lowers whatever tracing ``f`` gives at
    that moment (here: a constant drawn from numpy's RNG). The program is keyed by
    the module its own lowering produced, so cold and warm runs give exactly stock
    JAX's results and leave the RNG where stock JAX leaves it."""

    def py(cache, seed):
        env = {k: v for k, v in os.environ.items() if not k.startswith("JAX_PCACHE_")}
        if cache is not None:
            env["JAX_PCACHE_DIR"] = str(cache)
        proc = subprocess.run(
            [sys.executable, "-c", STATEFUL_RULE, seed], env=env, capture_output=True, text=True
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        return json.loads(proc.stdout.strip().splitlines()[-1])

    cache = tmp_path / "cache"
    stock = py(None, seed)
    cold, warm = py(cache, seed), py(cache, seed)
    other = py(cache, "1" if seed == "0" else "0")  # another draw: another module
    assert cold["out"] == warm["out"] == stock["out"]
    assert cold["draw"] == warm["draw"] == stock["draw"]
    assert warm["compiles"] == 0 < cold["compiles"]
    assert other["out"] != stock["out"] and other["out"] == py(None, other_seed(seed))["out"]


def other_seed(seed: str) -> str:
    return "1" if seed == "0" else "0"
