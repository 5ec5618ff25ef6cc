"""A hit skips lowering; it must not skip what lowering does besides the module.

Each claim is checked in real processes against stock JAX: a cold process fills the
cache, a warm one (a fresh interpreter) hits it, and both must behave as JAX alone:
LAPACK kernels initialized (the warm hit used to segfault), lowering's warnings
re-issued under the user's filters, the `jax_log_compiles` record logged, JAX's
configuration and cache object untouched, `-W error` never turning a cache failure
into an exception, and JAX's cache-clearing calls honoured.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

EVENTS = textwrap.dedent(
    """
    import json, hashlib, jax, numpy as np
    COUNTS = {"compile": 0, "lower": 0}
    def _listen(name, secs, **kw):
        if name == "/jax/core/compile/backend_compile_duration":
            COUNTS["compile"] += 1
        if name == "/jax/core/compile/jaxpr_to_mlir_module_duration":
            COUNTS["lower"] += 1
    jax.monitoring.register_event_duration_secs_listener(_listen)
    # Start the backends (and with them pcache's plugin) before the first jit: with
    # JAX_PCACHE_DIR alone, the program whose lowering starts them is not cached yet.
    jax.devices()
    def digest(tree):
        h = hashlib.sha256()
        for leaf in jax.tree_util.tree_leaves(tree):
            h.update(np.asarray(leaf).tobytes())
        return h.hexdigest()
    """
)


def run(code: str, cache: Path | None, *flags: str, env: dict | None = None, check=True):
    """Run ``code`` in a fresh interpreter, pcache switched on by JAX_PCACHE_DIR alone
    (or stock JAX when ``cache`` is None); returns (the last JSON line, stderr)."""
    full_env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("JAX_PCACHE_") or k == "JAX_PCACHE_CHECK"
    }
    full_env.update(env or {})
    if cache is not None:
        full_env["JAX_PCACHE_DIR"] = str(cache)
    proc = subprocess.run(
        [sys.executable, *flags, "-c", EVENTS + textwrap.dedent(code)],
        cwd=ROOT,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if check:
        assert proc.returncode == 0, f"rc={proc.returncode}\n{proc.stderr[-4000:]}"
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    return (json.loads(lines[-1]) if lines else None), proc.stderr


LINALG = """
import jax.numpy as jnp, jax.scipy.linalg as jsl
a = jnp.array([[4.0, 1.0, 0.5], [1.0, 3.0, 0.2], [0.5, 0.2, 2.0]])
b = jnp.array([1.0, 2.0, 3.0])
out = {
    "cholesky": jax.jit(jnp.linalg.cholesky)(a),
    "solve": jax.jit(jnp.linalg.solve)(a, b),
    "inv": jnp.linalg.inv(a),  # eager
    "lu": jax.jit(jsl.lu)(a),
    "triangular": jax.jit(lambda m, v: jsl.solve_triangular(m, v, lower=True))(a, b),
    "slogdet": jnp.linalg.slogdet(a),
    "svd": jax.jit(jnp.linalg.svd)(a),
    "eigh": jax.jit(jnp.linalg.eigh)(a),
    "qr": jax.jit(jnp.linalg.qr)(a),
    "eig": jax.jit(jnp.linalg.eig)(a),
}
print(json.dumps({"digests": {k: digest(v) for k, v in out.items()}, **COUNTS}))
"""


def test_lapack_kernels_on_a_warm_hit(tmp_path):
    """The reported crash: a fresh process whose LAPACK programs all hit segfaulted,
    because the hit skipped the lowering rule that initializes LAPACK."""
    stock, _ = run(LINALG, None)
    cold, _ = run(LINALG, tmp_path)
    warm, _ = run(LINALG, tmp_path)  # exit 139 before the fix
    assert cold["digests"] == stock["digests"] == warm["digests"]
    assert cold["compile"] > 0
    assert warm["compile"] == 0 and warm["lower"] == 0, warm


def test_lapack_initialized_by_a_preloaded_entry(tmp_path):
    """The preload thread deserializes the previous run's entries: those also
    initialize their kernels (a run that only takes preloaded executables)."""
    code = """
import jax.numpy as jnp
a = jnp.eye(3) * 2.0
r = [jax.jit(jnp.linalg.cholesky)(a), jax.jit(jnp.linalg.inv)(a)]
import pcache
print(json.dumps({"d": digest(r), "preload_hits": pcache.stats()["preload_hits"], **COUNTS}))
"""
    script = tmp_path / "prog.py"
    script.write_text(EVENTS + textwrap.dedent(code))
    cache = tmp_path / "cache"
    outs = []
    for _ in range(3):
        proc = subprocess.run(
            [sys.executable, str(script)],
            env={**os.environ, "JAX_PCACHE_DIR": str(cache)},
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        outs.append(json.loads(proc.stdout.splitlines()[-1]))
    assert outs[0]["d"] == outs[1]["d"] == outs[2]["d"]
    assert outs[2]["compile"] == 0 and outs[2]["preload_hits"] > 0, outs[2]


DONATE = """
import warnings
# No output can alias the donated inputs (JAX's own test_jit_donate_warning_raised).
f = jax.jit(lambda x, y: x.sum() + y.sum().astype("float32"), donate_argnums=(0, 1))
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    y = f(jax.numpy.ones(2, "float32"), jax.numpy.ones(2, "int32"))
msgs = [str(m.message) for m in w if "donated" in str(m.message)]
cats = [m.category.__name__ for m in w if "donated" in str(m.message)]
print(json.dumps({"msgs": msgs, "cats": cats, "d": digest(y), **COUNTS}))
"""


def test_lowering_warnings_are_reissued_on_a_hit(tmp_path):
    """ "Some donated buffers were not usable" is issued while lowering: a warm hit
    issues it too, with the same category and text."""
    stock, _ = run(DONATE, None)
    cold, _ = run(DONATE, tmp_path)
    warm, _ = run(DONATE, tmp_path)
    assert stock["msgs"], "the program no longer makes JAX warn"
    assert cold["msgs"] == stock["msgs"] == warm["msgs"]
    assert cold["cats"] == stock["cats"] == warm["cats"]
    assert warm["compile"] == 0 and warm["d"] == stock["d"]


def test_reissued_warning_obeys_error_filter(tmp_path):
    """Under -W error the donation warning is an exception in stock JAX; a warm hit
    raises the same exception, not silently nothing."""
    code = """
try:
    f = jax.jit(lambda x, y: x.sum() + y.sum().astype("float32"), donate_argnums=(0, 1))
    f(jax.numpy.ones(2, "float32"), jax.numpy.ones(2, "int32"))
    print(json.dumps({"raised": None, **COUNTS}))
except UserWarning as e:
    print(json.dumps({"raised": type(e).__name__, **COUNTS}))
"""
    stock, _ = run(code, None, "-W", "error::UserWarning")
    run(code, tmp_path)  # fill the cache without the filter
    warm, _ = run(code, tmp_path, "-W", "error::UserWarning")
    assert stock["raised"] == "UserWarning"
    assert warm["raised"] == "UserWarning" and warm["compile"] == 0


def test_log_compiles_record_on_a_hit(tmp_path):
    code = """
jax.config.update("jax_log_compiles", True)
jax.jit(lambda x: x * 3.0 + 1.0)(jax.numpy.ones(4))
print(json.dumps(COUNTS))
"""
    _, stock_err = run(code, None)
    run(code, tmp_path)
    warm, warm_err = run(code, tmp_path)
    for line in ("Compiling jit(<lambda>) with global shapes and types",
                 "Finished XLA compilation of jit(<lambda>) in"):  # fmt: skip
        assert line in stock_err
        assert line in warm_err and warm["compile"] == 0


def test_jax_configuration_and_cache_object_untouched(tmp_path):
    """Enabling pcache changes no JAX setting (JAX's own test base class asserts
    this around every test) and leaves JAX's persistent-cache object alone."""
    code = f"""
from jax._src import compilation_cache as cc
before = dict(jax.config.values)
cache_before = cc._cache
import pcache
pcache.enable({str(tmp_path)!r})
jax.jit(lambda x: x + 1)(1.0)
changed = sorted(k for k in set(before) | set(jax.config.values)
                 if before.get(k) != jax.config.values.get(k))
print(json.dumps({{"changed": changed, "same_cache": cc._cache is cache_before}}))
"""
    out, _ = run(code, None)
    assert out == {"changed": [], "same_cache": True}


def test_W_error_never_turns_a_cache_failure_into_an_exception(tmp_path):
    """A damaged store under `-W error`: the program runs and prints the right
    result; the failure is logged (once), not warned."""
    code = """
y = jax.jit(lambda x: x * 2.0 + 1.0)(jax.numpy.arange(4.0))
import pcache
s = pcache.stats()
print(json.dumps({"d": digest(y), "errors": s.get("errors", 0), **COUNTS}))
"""
    stock, _ = run(code, None)
    cold, _ = run(code, tmp_path)
    # Damage every stored entry's bytes (the HMAC then fails on load).
    import sqlite3

    db = sqlite3.connect(tmp_path / "store" / "store.db")
    db.execute("UPDATE blobs SET data = zeroblob(length(data))")
    db.commit()
    db.close()
    warm, err = run(code, tmp_path, "-W", "error")
    assert warm["d"] == stock["d"]
    assert warm["errors"] >= 1 and warm["compile"] == cold["compile"]  # all recompiled
    assert err.count("is corrupt") == 1, err  # logged once, for the first entry


def test_clear_caches_drops_the_memory_tier(tmp_path):
    code = f"""
import gc, weakref
import pcache
pcache.enable({str(tmp_path)!r})
def make():
    w = jax.numpy.arange(1000.0)
    return jax.jit(lambda x: x @ w), weakref.ref(w)
f, ref = make()
f(jax.numpy.ones(1000))
g, ref2 = make()
g(jax.numpy.ones(1000))  # a hit: equal program, equal constant
before = pcache.stats()["memory_entries"]
jax.clear_caches()
after_clear = pcache.stats()["memory_entries"]
del f, g
gc.collect()
print(json.dumps({{"before": before, "after": after_clear,
                   "alive": [ref() is not None, ref2() is not None]}}))
"""
    out, _ = run(code, None)
    assert out["before"] >= 1 and out["after"] == 0
    assert out["alive"] == [False, False], "pcache kept a deleted function's array alive"


def test_jit_clear_cache_is_honoured(tmp_path):
    code = f"""
import pcache
pcache.enable({str(tmp_path)!r})
f = jax.jit(lambda x: x - 1.0)
f(1.0)
f.clear_cache()
cleared = pcache.stats()["memory_entries"]
y = float(f(1.0))
s = pcache.stats()
print(json.dumps({{"cleared": cleared, "y": y, "entries": s["memory_entries"],
                   "disk_hits": s["disk_hits"]}}))
"""
    out, _ = run(code, None)
    # emptied, then served again from the store
    assert out == {"cleared": 0, "y": 0.0, "entries": 1, "disk_hits": 1}


@pytest.mark.parametrize(
    "spec",
    [
        "P('x', unreduced={'y'})",
        "P(None, reduced={'y'})",
    ],
)
def test_partition_spec_with_unreduced_axes_is_encoded(spec):
    """JAX forbids iterating such a spec; the canonical form reads its partitions."""
    from jax.sharding import PartitionSpec as P

    from pcache import _canon

    assert _canon.canonicalize(eval(spec)) != _canon.canonicalize(P("x"))
    assert _canon.canonicalize(eval(spec)) == _canon.canonicalize(eval(spec))


def test_extended_dtype_is_a_clean_bypass(tmp_path):
    """An aval of a dtype the encoder does not know is a bypass with its reason,
    never an internal exception (this test runs with JAX_PCACHE_RAISE_ERRORS=1)."""
    code = f"""
import jax.numpy as jnp
from jax._src import dtypes
import pcache
pcache.enable({str(tmp_path)!r}, raise_errors=True)
dt = dtypes.primal_tangent_dtype(jnp.int8, jnp.bfloat16)
x = jnp.arange(3, dtype=jnp.int8)
@jax.custom_gradient
def f(x):
    return jnp.int8(x).astype(jnp.bfloat16) * 2 + 1, lambda g: (2 * g,)
def h():
    r, bwd = jax.vjp(f, x.astype(dt))
    return r, bwd(jnp.ones(3, jnp.bfloat16))[0]
y = jax.jit(h)()
s = pcache.stats()
print(json.dumps({{"d": digest(y), "bypass": s["bypass_reasons"], "errors": s["errors"]}}))
"""
    out, _ = run(code, None)
    assert out["errors"] == 0
    assert any(r.startswith("unknown-value:") for r in out["bypass"]), out
