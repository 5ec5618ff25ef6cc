"""Real library programs, cold and warm: pcache beside stock JAX and JAX's own
persistent cache.

    python scripts/real_programs.py [--libs DIR] [--workloads numpyro,diffrax,...] [--remote]
        [--hash-seed N|random] [--pcache-only]

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
* ``neural_ode``: diffrax's neural-ODE example in small (optax training,
  vmapped solves; equinox's ``vprim`` carries a user primitive as a param).
* ``neutra``: NumPyro's NeuTra example in small (AutoBNAFNormal, SVI, NUTS).
* ``implicit``: diffrax's Kvaerno5 and an optimistix root find (lineax and
  optimistix filter primitives: equinox Modules in treedef params).
* ``cnn``: a plain-JAX CNN training step (max-pool gradients carry ``lax.ge_p``).

Every run gets ``PYTHONHASHSEED=0`` unless ``--hash-seed random``: NumPyro's
``Trace_ELBO`` traces per-process hash order (see ``neutra``). Also needs
optax, optimistix and lineax for the new workloads (``pip install --target``
as above). Printed besides: pcache's stats in the cold and warm process (bypass and
nonpersistent reasons, HLO-seam hits and compiles).
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


def neural_ode_workload():
    """diffrax's neural-ODE example, in small: an MLP vector field trained with
    optax on batches of trajectories (vmapped solves, equinox's runtime checks,
    its `vprim` primitive carrying a user primitive as a param)."""
    import diffrax
    import equinox as eqx
    import jax
    import jax.numpy as jnp
    import optax

    class Func(eqx.Module):
        mlp: eqx.nn.MLP

        def __call__(self, t, y, args):
            return self.mlp(y)

    class NeuralODE(eqx.Module):
        func: Func

        def __call__(self, ts, y0):
            sol = diffrax.diffeqsolve(
                diffrax.ODETerm(self.func),
                diffrax.Tsit5(),
                t0=ts[0],
                t1=ts[-1],
                dt0=ts[1] - ts[0],
                y0=y0,
                stepsize_controller=diffrax.PIDController(rtol=1e-3, atol=1e-6),
                saveat=diffrax.SaveAt(ts=ts),
            )
            return sol.ys

    key = jax.random.PRNGKey(5678)
    dkey, mkey = jax.random.split(key)
    ts = jnp.linspace(0.0, 5.0, 20)
    y0 = jax.random.uniform(dkey, (8, 2), minval=-0.6, maxval=1.0)

    def true_field(t, y, args):
        x, v = y
        return jnp.stack([v, -x - 0.1 * v])

    ys = jax.vmap(
        lambda y: (
            diffrax.diffeqsolve(
                diffrax.ODETerm(true_field),
                diffrax.Tsit5(),
                ts[0],
                ts[-1],
                0.1,
                y,
                saveat=diffrax.SaveAt(ts=ts),
                stepsize_controller=diffrax.PIDController(rtol=1e-3, atol=1e-6),
            ).ys
        )
    )(y0)
    mlp = eqx.nn.MLP(2, 2, 32, 2, activation=jax.nn.softplus, key=mkey)
    model = NeuralODE(Func(mlp))
    optim = optax.adabelief(3e-3)

    @eqx.filter_value_and_grad
    def grad_loss(model, ti, yi):
        y_pred = jax.vmap(model, in_axes=(None, 0))(ti, yi[:, 0])
        return jnp.mean((yi - y_pred) ** 2)

    @eqx.filter_jit
    def make_step(ti, yi, model, opt_state):
        loss, grads = grad_loss(model, ti, yi)
        updates, opt_state = optim.update(grads, opt_state)
        return loss, eqx.apply_updates(model, updates), opt_state

    losses = []
    for length in (0.25, 1.0):
        opt_state = optim.init(eqx.filter(model, eqx.is_inexact_array))
        n = int(len(ts) * length)
        for _ in range(3):
            loss, model, opt_state = make_step(ts[:n], ys[:, :n], model, opt_state)
            losses.append(loss)
    return [*losses, *jax.tree_util.tree_leaves(eqx.filter(model, eqx.is_inexact_array))]


def neutra_workload():
    """NumPyro's NeuTra example, in small: an AutoBNAFNormal guide trained with
    SVI, then NUTS on the reparametrized model. Trace_ELBO sums its per-site terms
    in the order of a set of site names (Python's string hash order): without a
    pinned PYTHONHASHSEED, about half the processes trace the SVI step as another
    program (scripts/key_stability.py)."""
    import jax
    import jax.numpy as jnp
    import numpyro
    import numpyro.distributions as dist
    from jax.scipy.special import logsumexp
    from numpyro import optim
    from numpyro.distributions import constraints
    from numpyro.infer import MCMC, NUTS, SVI, Trace_ELBO
    from numpyro.infer.autoguide import AutoBNAFNormal
    from numpyro.infer.reparam import NeuTraReparam

    class DualMoon(dist.Distribution):
        support = constraints.real_vector

        def __init__(self):
            super().__init__(event_shape=(2,))

        def sample(self, key, sample_shape=()):
            return jnp.zeros(sample_shape + self.event_shape)

        def log_prob(self, x):
            term1 = 0.5 * ((jnp.linalg.norm(x, axis=-1) - 2) / 0.4) ** 2
            term2 = -0.5 * ((x[..., :1] + jnp.array([-2.0, 2.0])) / 0.6) ** 2
            return -(term1 - logsumexp(term2, axis=-1))

    def model():
        numpyro.sample("x", DualMoon())

    guide = AutoBNAFNormal(model, hidden_factors=[4, 4])
    svi = SVI(model, guide, optim.Adam(0.003), Trace_ELBO())
    result = svi.run(jax.random.PRNGKey(1), 300, progress_bar=False)
    neutra = NeuTraReparam(guide, result.params)
    mcmc = MCMC(NUTS(neutra.reparam(model)), num_warmup=100, num_samples=100, progress_bar=False)
    mcmc.run(jax.random.PRNGKey(3))
    zs = mcmc.get_samples()["auto_shared_latent"]
    return [result.losses, zs, neutra.transform_sample(zs)["x"]]


def implicit_workload():
    """Implicit solvers: diffrax's Kvaerno5 (optimistix's Newton, lineax's
    linear solves: equinox filter primitives whose params hold equinox Modules),
    and an optimistix root find."""
    import diffrax
    import jax
    import jax.numpy as jnp
    import optimistix as optx

    a = jnp.array([[-20.0, 1.0], [0.5, -3.0]])

    @jax.jit
    def solve(y0):
        return diffrax.diffeqsolve(
            diffrax.ODETerm(lambda t, y, args: a @ y),
            diffrax.Kvaerno5(),
            0.0,
            1.0,
            0.05,
            y0,
            stepsize_controller=diffrax.PIDController(rtol=1e-5, atol=1e-7),
            saveat=diffrax.SaveAt(ts=jnp.linspace(0.0, 1.0, 5)),
        ).ys

    @jax.jit
    def root(c):
        return optx.root_find(lambda y, c: y**3 + y - c, optx.Newton(1e-6, 1e-6), c, args=c).value

    return [solve(jnp.array([1.0, 2.0])), root(jnp.array([1.0, 2.0, 3.0]))]


def cnn_workload():
    """A small CNN training step in plain JAX: convolutions, max pooling (its
    gradient's select_and_scatter_add carries lax.ge_p as a param), optax-free SGD."""
    import jax
    import jax.numpy as jnp
    from jax import lax

    k1, k2, k3 = jax.random.split(jax.random.PRNGKey(0), 3)
    params = {
        "c1": jax.random.normal(k1, (8, 1, 3, 3)) * 0.3,
        "c2": jax.random.normal(k2, (8, 8, 3, 3)) * 0.1,
        "w": jax.random.normal(k3, (8 * 4 * 4, 10)) * 0.05,
    }
    x = jax.random.normal(jax.random.PRNGKey(1), (16, 1, 16, 16))
    y = jnp.arange(16) % 10

    def pool(h):
        return lax.reduce_window(h, -jnp.inf, lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")

    def loss(p, x, y):
        h = pool(jax.nn.relu(lax.conv_general_dilated(x, p["c1"], (1, 1), "SAME")))
        h = pool(jax.nn.relu(lax.conv_general_dilated(h, p["c2"], (1, 1), "SAME")))
        logits = h.reshape(h.shape[0], -1) @ p["w"]
        return -jnp.mean(jax.nn.log_softmax(logits)[jnp.arange(len(y)), y])

    @jax.jit
    def step(p, x, y):
        value, g = jax.value_and_grad(loss)(p, x, y)
        return value, jax.tree.map(lambda a, b: a - 0.1 * b, p, g)

    losses = []
    for _ in range(3):
        value, params = step(params, x, y)
        losses.append(value)
    return [*losses, *jax.tree_util.tree_leaves(params)]


WORKLOADS = {
    "numpyro": numpyro_workload,
    "diffrax": diffrax_workload,
    "neural_ode": neural_ode_workload,
    "neutra": neutra_workload,
    "implicit": implicit_workload,
    "cnn": cnn_workload,
}


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
            k: st.get(k)
            for k in (
                "compiles",
                "memory_hits",
                "disk_hits",
                "remote_hits",
                "bypasses",
                "hlo_hits",
                "hlo_compiles",
            )
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
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    ap.add_argument(
        "--hash-seed",
        default="0",
        help="PYTHONHASHSEED of every run ('random': each process its own, as by default "
        "in Python; NeuTra's SVI step then traces as one of two programs)",
    )
    ap.add_argument("--pcache-only", action="store_true", help="skip JAX's own cache rows")
    ap.add_argument("--remote", action="store_true", help="also a fleet of two hosts on Redis")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(args.child)
    if args.hash_seed != "random":
        os.environ["PYTHONHASHSEED"] = args.hash_seed
    for name in args.workloads.split(","):
        with tempfile.TemporaryDirectory() as tmp:
            jc, pc = Path(tmp, "jax-cache"), Path(tmp, "pcache")
            jax_env = {
                "JAX_COMPILATION_CACHE_DIR": str(jc),
                "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
                "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "0",
            }
            rows = [("stock JAX", run(name, {}, args.libs))]
            if not args.pcache_only:
                rows += [
                    ("JAX cache, cold", run(name, jax_env, args.libs)),
                    ("JAX cache, warm", run(name, jax_env, args.libs)),
                ]
            rows += [
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
        by_label = dict(rows)
        warm = by_label["pcache, warm"]
        print(f"  pcache cold: {by_label['pcache, cold']['pcache']}")
        print(f"  pcache warm: {warm['pcache']}")
        if args.remote:
            print(f"  remote, new host: {rows[-1][1]['pcache']}")
        ratios = [f"pcache {warm['wall'] / stock['wall']:.2f}x"]
        if "JAX cache, warm" in by_label:
            ratios.insert(
                0, f"JAX cache {by_label['JAX cache, warm']['wall'] / stock['wall']:.2f}x"
            )
        print(f"  warm work time vs stock: {', '.join(ratios)}")


if __name__ == "__main__":
    main()
