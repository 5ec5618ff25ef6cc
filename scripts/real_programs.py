"""Real library programs, cold and warm: pcache beside stock JAX and JAX's own
persistent cache.

    python scripts/real_programs.py [--libs DIR] [--workloads numpyro,diffrax] [--remote]

NumPyro and diffrax are not pcache dependencies: install them somewhere and pass
``--libs`` (a ``pip install --target`` folder, put on ``PYTHONPATH``), e.g.

    pip install --no-deps --target /tmp/libs numpyro multipledispatch tqdm \\
        equinox diffrax jaxtyping lineax optimistix typeguard wadler_lindig

Each workload runs in fresh processes: stock JAX; JAX's persistent cache (cold,
then warm); pcache through ``JAX_PCACHE_DIR`` alone (cold, then warm). Printed per
run: backend compiles (JAX's own event, which also counts JAX's cache hits),
lowerings, wall time, and whether the results are bitwise those of stock JAX.
``--remote`` adds two hosts on one redis-server (started here): the first
compiles into the remote tier, a second with an empty local directory loads it.

* ``numpyro``: NUTS on a small regression with an LKJ-Cholesky prior (its
  ``vec_to_tril_matrix`` builds scatter dimension numbers from ``range``).
* ``diffrax``: value and gradient of a neural-ODE loss under ``eqx.filter_jit``
  (Tsit5, adaptive steps); diffrax's runtime checks (``eqx.error_if``) lower to
  host callbacks.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def numpyro_workload():
    import jax
    import jax.numpy as jnp
    import numpyro
    import numpyro.distributions as dist
    from numpyro.infer import MCMC, NUTS

    def model(x, y):
        w = numpyro.sample("w", dist.Normal(0.0, 1.0).expand([3]))
        chol = numpyro.sample("L", dist.LKJCholesky(3, 2.0))
        s = numpyro.sample("s", dist.HalfNormal(1.0))
        numpyro.sample("y", dist.Normal(x @ (chol @ w), s), obs=y)

    kx, ky = jax.random.split(jax.random.PRNGKey(1))
    x = jax.random.normal(kx, (50, 3))
    y = x @ jnp.array([1.0, -2.0, 0.5]) + 0.1 * jax.random.normal(ky, (50,))
    mcmc = MCMC(NUTS(model), num_warmup=150, num_samples=150, progress_bar=False)
    mcmc.run(jax.random.PRNGKey(0), x, y)
    return [v for _, v in sorted(mcmc.get_samples().items())]


def diffrax_workload():
    import diffrax
    import equinox as eqx
    import jax
    import jax.numpy as jnp

    class Field(eqx.Module):
        mlp: eqx.nn.MLP

        def __call__(self, t, y, args):
            return self.mlp(y)

    field = Field(eqx.nn.MLP(2, 2, 32, 2, activation=jnp.tanh, key=jax.random.PRNGKey(0)))
    ts = jnp.linspace(0.0, 1.0, 10)

    def solve(model, y0):
        sol = diffrax.diffeqsolve(
            diffrax.ODETerm(model),
            diffrax.Tsit5(),
            0.0,
            1.0,
            0.1,
            y0,
            stepsize_controller=diffrax.PIDController(rtol=1e-4, atol=1e-6),
            saveat=diffrax.SaveAt(ts=ts),
        )
        return sol.ys

    @eqx.filter_jit
    @eqx.filter_value_and_grad
    def loss(model, y0):
        return jnp.mean(solve(model, y0) ** 2)

    y0 = jnp.array([1.0, 0.5])
    value, grads = loss(field, y0)
    ys = eqx.filter_jit(solve)(field, y0)
    return [value, ys, *jax.tree_util.tree_leaves(grads)]


WORKLOADS = {"numpyro": numpyro_workload, "diffrax": diffrax_workload}


def child(name: str) -> None:
    import jax
    import numpy as np

    counts = {"compiles": 0, "lowerings": 0}

    def listener(event, secs, **kw):
        if event == "/jax/core/compile/backend_compile_duration":
            counts["compiles"] += 1
        elif event == "/jax/core/compile/jaxpr_to_mlir_module_duration":
            counts["lowerings"] += 1

    jax.monitoring.register_event_duration_secs_listener(listener)
    t0 = time.perf_counter()
    outs = WORKLOADS[name]()
    wall = time.perf_counter() - t0
    digest = hashlib.sha256(b"".join(np.asarray(o).tobytes() for o in outs)).hexdigest()
    stats = {}
    if "pcache._api" in sys.modules:
        st = sys.modules["pcache._api"].stats()
        stats = {
            k: st[k] for k in ("compiles", "memory_hits", "disk_hits", "remote_hits", "bypasses")
        }
        stats["bypass_reasons"] = st["bypass_reasons"]
        stats["nonpersistent_reasons"] = st["nonpersistent_reasons"]
    print(json.dumps({"wall": wall, "digest": digest, **counts, "pcache": stats}), flush=True)


def run(name: str, env_extra: dict, libs: str | None) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("JAX_PCACHE_")}
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    if libs:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (libs, env.get("PYTHONPATH")) if p)
    env.update(env_extra)
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, __file__, "--child", name], env=env, capture_output=True, text=True
    )
    if proc.returncode != 0:
        raise SystemExit(f"{name} failed:\n{proc.stderr[-3000:]}")
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    out["process"] = time.perf_counter() - t0
    return out


def remote_rows(name: str, tmp: Path, libs: str | None) -> list:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from redis_helpers import RedisServer, fleet_key

    srv = RedisServer(tmp / "redis")
    key = fleet_key(tmp / "fleet.key")
    try:
        env = {"JAX_PCACHE_REMOTE": srv.url, "JAX_PCACHE_REMOTE_SECRET_FILE": str(key)}
        first = run(name, {**env, "JAX_PCACHE_DIR": str(tmp / "host1")}, libs)
        second = run(name, {**env, "JAX_PCACHE_DIR": str(tmp / "host2")}, libs)
    finally:
        srv.stop()
    return [("remote, 1st host", first), ("remote, new host", second)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--libs", help="a folder holding numpyro, diffrax, equinox...")
    ap.add_argument("--workloads", default="numpyro,diffrax")
    ap.add_argument("--remote", action="store_true", help="also a fleet of two hosts on Redis")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(args.child)
    for name in args.workloads.split(","):
        with tempfile.TemporaryDirectory() as tmp:
            jc, pc = Path(tmp, "jax-cache"), Path(tmp, "pcache")
            jax_env = {
                "JAX_COMPILATION_CACHE_DIR": str(jc),
                "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
                "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "0",
            }
            rows = [
                ("stock JAX", run(name, {}, args.libs)),
                ("JAX cache, cold", run(name, jax_env, args.libs)),
                ("JAX cache, warm", run(name, jax_env, args.libs)),
                ("pcache, cold", run(name, {"JAX_PCACHE_DIR": str(pc)}, args.libs)),
                ("pcache, warm", run(name, {"JAX_PCACHE_DIR": str(pc)}, args.libs)),
            ]
            if args.remote:
                rows += remote_rows(name, Path(tmp), args.libs)
        stock = rows[0][1]
        print(f"\n{name}")
        print(
            f"  {'run':<18}{'compiles':>9}{'lowerings':>10}{'work s':>8}{'process s':>10}  bitwise"
        )
        for label, r in rows:
            same = "yes" if r["digest"] == stock["digest"] else "NO"
            print(
                f"  {label:<18}{r['compiles']:>9}{r['lowerings']:>10}{r['wall']:>8.2f}"
                f"{r['process']:>10.2f}  {same}"
            )
        warm = rows[4][1]
        print(f"  pcache warm: {warm['pcache']}")
        if args.remote:
            print(f"  remote, new host: {rows[-1][1]['pcache']}")
        print(
            f"  warm work time vs stock: JAX cache {rows[2][1]['wall'] / stock['wall']:.2f}x, "
            f"pcache {warm['wall'] / stock['wall']:.2f}x"
        )


if __name__ == "__main__":
    main()
