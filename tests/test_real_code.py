"""Programs shaped like real library code (issue 24), in real subprocesses: stock
JAX, then pcache cold and warm through ``JAX_PCACHE_DIR`` alone. A warm process
compiles nothing, and every result is bitwise stock JAX's.

The programs are in tests/real_code_prog.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import zygote

ROOT = Path(__file__).resolve().parents[1]
PROG = ROOT / "tests" / "real_code_prog.py"


def run(cache: Path | None, *argv: str, extra_env: dict | None = None) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("JAX_PCACHE_")}
    if cache is not None:
        env["JAX_PCACHE_DIR"] = str(cache)
        env["JAX_PCACHE_RAISE_ERRORS"] = "1"
        env["JAX_PCACHE_TRACE_RECORD_AFTER"] = "1"
    env.update(extra_env or {})
    proc = zygote.run([str(PROG), *argv], env, ROOT, 300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.splitlines()[-1])


def cold_warm(tmp_path, case: str, *argv: str) -> tuple[dict, dict, dict]:
    stock = run(None, case, *argv)
    cold = run(tmp_path / "cache", case, *argv)
    warm = run(tmp_path / "cache", case, *argv)
    assert cold["results"] == stock["results"]
    assert warm["results"] == stock["results"]
    return stock, cold, warm


def test_user_primitive_param_is_cached(tmp_path):
    # equinox's vprim carries a user Primitive as a param (diffrax's neural ODE:
    # once `unknown-param:vprim.prim`, four uncached compiles per process). Two
    # primitives here share a name and differ in their rules: the results (bitwise
    # stock) show neither was served the other's program.
    stock, cold, warm = cold_warm(tmp_path, "vprim")
    assert stock["results"][0] != stock["results"][2]  # sin's and cos's differ
    assert not cold["stats"]["bypass_reasons"], cold["stats"]
    assert not warm["stats"]["bypass_reasons"], warm["stats"]
    assert warm["compiles"] == 0, warm
    assert warm["stats"]["disk_hits"] >= 4, warm["stats"]


def test_jax_primitive_param_is_cached_without_lowering(tmp_path):
    # select_and_scatter_add's select_prim (lax.ge_p / lax.le_p), tested by identity
    # in its lowering: keyed as JAX's own primitive, a warm process neither
    # compiles nor lowers the max-pool gradients.
    stock, cold, warm = cold_warm(tmp_path, "maxpool")
    assert stock["results"][0] != stock["results"][1]
    assert not cold["stats"]["bypass_reasons"], cold["stats"]
    assert warm["compiles"] == 0, warm
    assert warm["lowerings"] == 0, warm


@pytest.fixture
def cache(tmp_path):
    import pcache

    path = pcache.enable(tmp_path / "cache", raise_errors=True, trace_reuse=False)
    yield path
    pcache.disable()


def test_primitive_params_keys(cache):
    import jax
    import jax.extend.core
    import jax.numpy as jnp
    from jax import lax

    import pcache
    from pcache import _canon, _canon_values

    x = jnp.ones((4, 4))

    def pool(op, init):
        return jax.grad(lambda a: lax.reduce_window(a, init, op, (2, 2), (2, 2), "VALID").sum())

    kmax = pcache.key(pool(lax.max, -jnp.inf), x)
    kmin = pcache.key(pool(lax.min, jnp.inf), x)
    assert kmax.persistent and not kmax.relower
    assert "jaxpr" in kmax.diff(kmin)  # ge_p vs le_p

    # A primitive that is not JAX's own (by identity), even one named like JAX's:
    # keyed by its lowered module too.
    fake_ge = jax.extend.core.Primitive("ge")
    jx = jax.make_jaxpr(pool(lax.max, -jnp.inf))(x)
    eqn = next(e for e in jx.jaxpr.eqns if "select_prim" in e.params)
    assert _canon_values.jax_primitive_name(eqn.params["select_prim"]).endswith(":ge_p")
    assert _canon_values.jax_primitive_name(fake_ge) is None
    ctx = _canon_values.Ctx()
    assert _canon_values.enc(fake_ge, ctx) != _canon_values.enc(lax.ge_p, _canon_values.Ctx())
    assert ctx.relower
    with pytest.raises(pcache.Uncacheable):
        _canon.canonicalize(fake_ge)


def test_host_callbacks_served_by_the_hlo_seam(tmp_path):
    # A program the jit seam cannot key (an opaque param) with host callbacks: JAX's
    # own cache refuses it; the HLO seam stores it and binds a hit to this process's
    # callbacks (another factor: the results and records of that factor's stock run).
    cache = tmp_path / "cache"
    cold = run(cache, "hlo_callback", "2")
    assert cold["stats"]["hlo_misses"] == 1 and cold["stats"]["hlo_compiles"] == 1, cold
    for factor in ("2", "5"):
        stock = run(None, "hlo_callback", factor)
        warm = run(cache, "hlo_callback", factor)
        assert warm["results"] == stock["results"], factor
        st = warm["stats"]
        assert st["hlo_hits"] == 1 and st["hlo_compiles"] == 0 and st["compiles"] == 0, st
    assert cold["results"] != stock["results"]  # the callbacks' factor shows


def test_hlo_seam_keys_callback_count_and_refuses_pointers():
    from pcache import _hlo_seam

    k = "jit_f-" + "ab" * 32
    one, two = _hlo_seam._with_callbacks(k, 1), _hlo_seam._with_callbacks(k, 2)
    assert len({k, one, two}) == 3 and one.startswith("jit_f-")
    assert _hlo_seam._BY_INDEX >= {"xla_ffi_python_cpu_callback", "xla_ffi_python_gpu_callback"}


def seeded(seed: str) -> dict:
    return {"PYTHONHASHSEED": seed}


def test_hash_order_traces_are_other_programs(tmp_path):
    # NeuTra's false miss (issue 24, item 3): NumPyro's Trace_ELBO sums per-site
    # terms in the order of a set of site names, Python's string hash order, which
    # PYTHONHASHSEED randomizes per process: half the processes trace NeuTra's SVI
    # step as another program. Not a key instability: with one hash seed a warm
    # process compiles nothing; with another, the program (and its float32 result)
    # differs, and pcache must compile it rather than serve the first one's.
    cache = tmp_path / "cache"
    stock0 = run(None, "set_order", extra_env=seeded("0"))
    stock1 = run(None, "set_order", extra_env=seeded("1"))
    assert stock0["results"] != stock1["results"]
    cold = run(cache, "set_order", extra_env=seeded("0"))
    warm = run(cache, "set_order", extra_env=seeded("0"))
    assert cold["results"] == warm["results"] == stock0["results"]
    assert warm["compiles"] == 0 and warm["stats"]["misses"] == 0, warm
    other = run(cache, "set_order", extra_env=seeded("1"))
    assert other["results"] == stock1["results"]
    assert other["stats"]["misses"] >= 1, other["stats"]


def test_key_stability_script(tmp_path):
    script = ROOT / "scripts" / "key_stability.py"

    def check(*flags: str) -> subprocess.CompletedProcess:
        env = {k: v for k, v in os.environ.items() if not k.startswith("JAX_PCACHE_")}
        env.pop("PYTHONHASHSEED", None)
        return subprocess.run(
            [sys.executable, str(script), *flags, str(PROG), "set_order"],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )

    same = check("--hash-seed", "0")
    assert same.returncode == 0 and "stable" in same.stdout, same.stdout + same.stderr[-3000:]
    other = check("--hash-seed", "0,1", "--texts", "--diagnose")
    assert other.returncode == 1, other.stdout + other.stderr[-3000:]
    assert "[jit] loss" in other.stdout and "differs in: jaxpr" in other.stdout, other.stdout
    assert '"sub"' in other.stdout  # the text diff shows the reordered terms
    assert "stable with the hash seed pinned" in other.stdout, other.stdout


def test_param_without_canonical_form_is_served_by_the_hlo_seam(tmp_path):
    # A param pcache has no canonical form for: the jit seam bypasses, and the HLO
    # seam keys the program by its module (as JAX's own cache would). The two
    # configurations lower to other modules: never each other's executable.
    stock, cold, warm = cold_warm(tmp_path, "opaque_param")
    assert stock["results"][0] != stock["results"][1] and stock["results"][0] == stock["results"][2]
    assert cold["stats"]["hlo_compiles"] == 2, cold["stats"]
    st = warm["stats"]
    assert st["hlo_hits"] == 3 and st["hlo_compiles"] == 0 and st["compiles"] == 0, st


def test_custom_node_treedef_param_is_stored(tmp_path):
    # Once memory-only (`unserializable-pytree`): every process compiled it again.
    stock, cold, warm = cold_warm(tmp_path, "filter_primitive")
    assert not cold["stats"]["bypass_reasons"], cold["stats"]
    assert warm["compiles"] == 0 and warm["stats"]["disk_hits"] >= 2, warm
