"""Real library programs, cold and warm: pcache beside stock JAX and JAX's own
persistent cache.

    python scripts/real_programs.py [--libs DIR] [--workloads numpyro,diffrax,...] [--remote]
        [--hash-seed N|random] [--pcache-only] [--warm-runs N] [--hash-seeds 1,2,...]
        [--trace-persist]

None of these libraries is a pcache dependency: install them into a scratch
virtual environment that also has pcache (``pip install -e .``) and run the script
with its Python, or pass ``--libs`` (a ``pip install --target`` folder, put on
``PYTHONPATH``), e.g.

    pip install -c constraints.txt numpyro diffrax equinox optax optimistix lineax \\
        flax blackjax    # constraints.txt pins jax, jaxlib (and numpy) as installed

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
  optimistix filter primitives: equinox Modules in treedef params; lineax's
  ``linear_solve`` also carries equinox's ``Flatten`` output recorder and
  ``object()`` sentinels, which have no canonical form: the jit seam bypasses,
  the HLO seam serves them by their module).
* ``cnn``: a plain-JAX CNN training step (max-pool gradients carry ``lax.ge_p``).
* ``flax_nnx``: Flax NNX's MNIST tutorial in small (BatchNorm, Dropout,
  ``nnx.Optimizer`` over adamw, ``nnx.MultiMetric``, ``nnx.jit``; synthetic images).
* ``flax_linen``: a Linen CNN with BatchNorm and Dropout, ``TrainState`` over optax
  SGD with momentum, jitted train and eval steps.
* ``optax``: clip + adamw on a warmup-cosine schedule under ``lookahead``; L-BFGS
  with zoom line search in a ``while_loop`` (optax's docs).
* ``blackjax``: BlackJAX's quickstart (NUTS, ``window_adaptation``, a scan loop).
* ``numpyro_svi``: NumPyro's SVI on eight schools (AutoNormal, Adam, Trace_ELBO,
  Predictive, quantiles).

Every run gets ``PYTHONHASHSEED=0`` unless ``--hash-seed random``: NumPyro's
``Trace_ELBO`` traces per-process hash order (see ``neutra``). Printed besides:
seconds of tracing, lowering and backend compiles (``jax.monitoring``'s events),
pcache's stats in the cold and warm process (bypass and nonpersistent reasons,
HLO-seam hits and compiles), and at the end one Markdown row per workload (the
pcache-warm process: compiles, bypasses, nonpersistent programs, trace/lower/compile
seconds, bitwise, work time against stock and against JAX's warm cache).
``--warm-runs N`` runs N warm pcache processes after the cold one (each must
compile nothing), and with ``--trace-persist`` N warm ones with persisted traces,
whose median trace seconds it compares with the warm pcache ones' median. ``--hash-seeds 1,2,3`` instead runs, per seed, stock JAX and
pcache on one directory shared by all seeds, and compares each pcache process with
stock of its own seed: a process compiles only the programs its hash order traces
differently from every earlier one.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
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
    from diffrax_models import Field  # (module level, as upstream)

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
    from diffrax_models import Field as Func  # (module level, as upstream)
    from diffrax_models import NeuralODE

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
    import numpyro
    from neutra_model import DualMoon  # (module level, as upstream)
    from numpyro import optim
    from numpyro.infer import MCMC, NUTS, SVI, Trace_ELBO
    from numpyro.infer.autoguide import AutoBNAFNormal
    from numpyro.infer.reparam import NeuTraReparam

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


def flax_nnx_workload():
    """Flax NNX's MNIST tutorial in small: a CNN (Conv, BatchNorm, Dropout,
    avg_pool, Linear) trained with ``nnx.Optimizer(optax.adamw)`` and
    ``nnx.MultiMetric`` under ``nnx.jit``, then an eval step in ``model.eval()``
    mode; synthetic 28x28 images (no dataset download here)."""
    from functools import partial

    import jax
    import optax
    from flax import nnx

    class CNN(nnx.Module):
        def __init__(self, *, rngs: nnx.Rngs):
            self.conv1 = nnx.Conv(1, 8, kernel_size=(3, 3), rngs=rngs)
            self.batch_norm1 = nnx.BatchNorm(8, rngs=rngs)
            self.dropout1 = nnx.Dropout(rate=0.025, rngs=rngs)
            self.conv2 = nnx.Conv(8, 16, kernel_size=(3, 3), rngs=rngs)
            self.batch_norm2 = nnx.BatchNorm(16, rngs=rngs)
            self.avg_pool = partial(nnx.avg_pool, window_shape=(2, 2), strides=(2, 2))
            self.linear1 = nnx.Linear(16 * 7 * 7, 64, rngs=rngs)
            self.dropout2 = nnx.Dropout(rate=0.025, rngs=rngs)
            self.linear2 = nnx.Linear(64, 10, rngs=rngs)

        def __call__(self, x):
            x = self.avg_pool(nnx.relu(self.batch_norm1(self.dropout1(self.conv1(x)))))
            x = self.avg_pool(nnx.relu(self.batch_norm2(self.conv2(x))))
            x = x.reshape(x.shape[0], -1)
            x = nnx.relu(self.dropout2(self.linear1(x)))
            return self.linear2(x)

    model = CNN(rngs=nnx.Rngs(0))
    optimizer = nnx.Optimizer(model, optax.adamw(0.005, 0.9), wrt=nnx.Param)
    metrics = nnx.MultiMetric(accuracy=nnx.metrics.Accuracy(), loss=nnx.metrics.Average("loss"))

    def loss_fn(model, batch):
        logits = model(batch["image"])
        loss = optax.softmax_cross_entropy_with_integer_labels(
            logits=logits, labels=batch["label"]
        ).mean()
        return loss, logits

    @nnx.jit
    def train_step(model, optimizer, metrics, batch):
        grad_fn = nnx.value_and_grad(loss_fn, has_aux=True)
        (loss, logits), grads = grad_fn(model, batch)
        metrics.update(loss=loss, logits=logits, labels=batch["label"])
        optimizer.update(model, grads)

    @nnx.jit
    def eval_step(model, metrics, batch):
        loss, logits = loss_fn(model, batch)
        metrics.update(loss=loss, logits=logits, labels=batch["label"])

    kx, ky = jax.random.split(jax.random.PRNGKey(0))
    images = jax.random.uniform(kx, (4, 32, 28, 28, 1))
    labels = jax.random.randint(ky, (4, 32), 0, 10)
    history = []
    model.train()
    for step in range(3):
        train_step(model, optimizer, metrics, {"image": images[step], "label": labels[step]})
    history += list(metrics.compute().values())
    metrics.reset()
    model.eval()
    eval_step(model, metrics, {"image": images[3], "label": labels[3]})
    history += list(metrics.compute().values())
    return [*history, *jax.tree_util.tree_leaves(nnx.state(model))]


def flax_linen_workload():
    """A Flax Linen train step in the style of Flax's docs: a CNN with BatchNorm
    (mutable ``batch_stats``) and Dropout (an ``rngs`` stream), a ``TrainState``
    over ``optax.sgd`` with momentum, ``jax.jit`` train and eval steps."""
    import flax.linen as nn
    import jax
    import jax.numpy as jnp
    import optax
    from flax.training import train_state

    class CNN(nn.Module):
        @nn.compact
        def __call__(self, x, train: bool):
            x = nn.Conv(features=8, kernel_size=(3, 3))(x)
            x = nn.BatchNorm(use_running_average=not train)(x)
            x = nn.avg_pool(nn.relu(x), window_shape=(2, 2), strides=(2, 2))
            x = nn.Conv(features=16, kernel_size=(3, 3))(x)
            x = nn.avg_pool(nn.relu(x), window_shape=(2, 2), strides=(2, 2))
            x = x.reshape((x.shape[0], -1))
            x = nn.Dense(features=64)(x)
            x = nn.Dropout(0.1, deterministic=not train)(nn.relu(x))
            return nn.Dense(features=10)(x)

    class TrainState(train_state.TrainState):
        batch_stats: dict

    kx, ky, kinit = jax.random.split(jax.random.PRNGKey(0), 3)
    images = jax.random.uniform(kx, (4, 32, 28, 28, 1))
    labels = jax.random.randint(ky, (4, 32), 0, 10)
    cnn = CNN()
    variables = cnn.init(kinit, jnp.ones((1, 28, 28, 1)), train=False)
    state = TrainState.create(
        apply_fn=cnn.apply,
        params=variables["params"],
        batch_stats=variables["batch_stats"],
        tx=optax.sgd(0.05, 0.9),
    )

    @jax.jit
    def train_step(state, batch, dropout_key):
        def loss_fn(params):
            logits, updates = state.apply_fn(
                {"params": params, "batch_stats": state.batch_stats},
                batch["image"],
                train=True,
                rngs={"dropout": dropout_key},
                mutable=["batch_stats"],
            )
            loss = optax.softmax_cross_entropy_with_integer_labels(logits, batch["label"]).mean()
            return loss, (logits, updates)

        (loss, (_, updates)), grads = jax.value_and_grad(loss_fn, has_aux=True)(state.params)
        state = state.apply_gradients(grads=grads)
        return state.replace(batch_stats=updates["batch_stats"]), loss

    @jax.jit
    def eval_step(state, batch):
        logits = state.apply_fn(
            {"params": state.params, "batch_stats": state.batch_stats}, batch["image"], train=False
        )
        return jnp.mean(jnp.argmax(logits, -1) == batch["label"])

    losses = []
    key = jax.random.PRNGKey(1)
    for step in range(3):
        key, dropout_key = jax.random.split(key)
        state, loss = train_step(state, {"image": images[step], "label": labels[step]}, dropout_key)
        losses.append(loss)
    acc = eval_step(state, {"image": images[3], "label": labels[3]})
    return [*losses, acc, *jax.tree_util.tree_leaves((state.params, state.batch_stats))]


def optax_workload():
    """optax alone, as in its docs: an MLP regression trained by a chain of
    ``clip_by_global_norm`` and ``adamw`` on a warmup-cosine schedule, wrapped in
    ``optax.lookahead``; then L-BFGS (zoom line search) on Rosenbrock inside a
    ``lax.while_loop``, with ``optax.value_and_grad_from_state``."""
    import jax
    import jax.numpy as jnp
    import optax
    import optax.tree_utils as otu

    kx, kw1, kw2 = jax.random.split(jax.random.PRNGKey(0), 3)
    x = jax.random.normal(kx, (128, 4))
    y = jnp.sin(x @ jnp.array([1.0, -0.5, 0.25, 2.0]))[:, None]
    params = {
        "w1": jax.random.normal(kw1, (4, 32)) * 0.5,
        "b1": jnp.zeros(32),
        "w2": jax.random.normal(kw2, (32, 1)) * 0.2,
        "b2": jnp.zeros(1),
    }

    def mlp_loss(p, x, y):
        h = jax.nn.gelu(x @ p["w1"] + p["b1"])
        return jnp.mean((h @ p["w2"] + p["b2"] - y) ** 2)

    schedule = optax.warmup_cosine_decay_schedule(
        init_value=0.0, peak_value=0.01, warmup_steps=10, decay_steps=100, end_value=1e-4
    )
    fast = optax.chain(optax.clip_by_global_norm(1.0), optax.adamw(learning_rate=schedule))
    optimizer = optax.lookahead(fast, sync_period=5, slow_step_size=0.5)
    opt_state = optimizer.init(optax.LookaheadParams.init_synced(params))

    @jax.jit
    def step(params, opt_state, x, y):
        loss, grads = jax.value_and_grad(mlp_loss)(params.fast, x, y)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    lparams = optax.LookaheadParams.init_synced(params)
    losses = []
    for _ in range(20):
        lparams, opt_state, loss = step(lparams, opt_state, x, y)
        losses.append(loss)

    def rosenbrock(z):
        return jnp.sum(100.0 * (z[1:] - z[:-1] ** 2) ** 2 + (1.0 - z[:-1]) ** 2)

    @jax.jit
    def run_lbfgs(init_params):
        opt = optax.lbfgs()
        value_and_grad_fun = optax.value_and_grad_from_state(rosenbrock)

        def step(carry):
            params, state = carry
            value, grad = value_and_grad_fun(params, state=state)
            updates, state = opt.update(
                grad, state, params, value=value, grad=grad, value_fn=rosenbrock
            )
            return optax.apply_updates(params, updates), state

        def continuing(carry):
            _, state = carry
            count = otu.tree_get(state, "count")
            err = otu.tree_norm(otu.tree_get(state, "grad"))
            return (count == 0) | ((count < 100) & (err >= 1e-3))

        return jax.lax.while_loop(continuing, step, (init_params, opt.init(init_params)))[0]

    z = run_lbfgs(jnp.zeros(8))
    return [*losses, *jax.tree_util.tree_leaves(lparams), z]


def blackjax_workload():
    """BlackJAX's quickstart: NUTS on a normal model's location and log-scale,
    step size and mass matrix from ``window_adaptation``, then an inference loop
    as a ``lax.scan`` over a jitted kernel step."""
    import blackjax
    import jax
    import jax.numpy as jnp
    import jax.scipy.stats as stats
    import numpy as np

    observed = np.random.default_rng(0).normal(10.0, 20.0, size=1_000)

    def logdensity_fn(loc, log_scale, observed=observed):
        scale = jnp.exp(log_scale)
        return log_scale + jnp.sum(stats.norm.logpdf(observed, loc, scale))

    def logdensity(x):
        return logdensity_fn(**x)

    def inference_loop(rng_key, kernel, initial_state, num_samples):
        @jax.jit
        def one_step(state, rng_key):
            state, _ = kernel(rng_key, state)
            return state, state

        keys = jax.random.split(rng_key, num_samples)
        _, states = jax.lax.scan(one_step, initial_state, keys)
        return states

    rng_key = jax.random.key(1000)
    warmup_key, sample_key = jax.random.split(rng_key)
    warmup = blackjax.window_adaptation(blackjax.nuts, logdensity)
    (state, parameters), _ = warmup.run(warmup_key, {"loc": 1.0, "log_scale": 1.0}, num_steps=200)
    kernel = blackjax.nuts(logdensity, **parameters).step
    states = inference_loop(sample_key, kernel, state, 200)
    return [
        parameters["step_size"],
        parameters["inverse_mass_matrix"],
        states.position["loc"],
        states.position["log_scale"],
    ]


def numpyro_svi_workload():
    """NumPyro's SVI, as in its docs: eight schools (a plate, HalfCauchy scale)
    fit by an ``AutoNormal`` guide with ``optim.Adam`` and ``Trace_ELBO``
    through ``svi.run``; then ``Predictive`` draws from the fitted guide."""
    import jax
    import numpy as np
    import numpyro
    import numpyro.distributions as dist
    from numpyro import optim
    from numpyro.infer import SVI, Predictive, Trace_ELBO
    from numpyro.infer.autoguide import AutoNormal

    J = 8
    y = np.array([28.0, 8.0, -3.0, 7.0, -1.0, 1.0, 18.0, 12.0])
    sigma = np.array([15.0, 10.0, 16.0, 11.0, 9.0, 11.0, 10.0, 18.0])

    def eight_schools(J, sigma, y=None):
        mu = numpyro.sample("mu", dist.Normal(0, 5))
        tau = numpyro.sample("tau", dist.HalfCauchy(5))
        with numpyro.plate("J", J):
            theta = numpyro.sample("theta", dist.Normal(mu, tau))
            numpyro.sample("obs", dist.Normal(theta, sigma), obs=y)

    guide = AutoNormal(eight_schools)
    svi = SVI(eight_schools, guide, optim.Adam(0.01), Trace_ELBO())
    result = svi.run(jax.random.PRNGKey(0), 1000, J, sigma, y=y, progress_bar=False)
    predictive = Predictive(eight_schools, guide=guide, params=result.params, num_samples=100)
    samples = predictive(jax.random.PRNGKey(1), J, sigma)
    quantiles = guide.quantiles(result.params, [0.25, 0.5, 0.75])
    return [
        result.losses,
        *[v for _, v in sorted(result.params.items())],
        *[v for _, v in sorted(samples.items())],
        *[v for _, v in sorted(quantiles.items())],
    ]


WORKLOADS = {
    "numpyro": numpyro_workload,
    "diffrax": diffrax_workload,
    "neural_ode": neural_ode_workload,
    "neutra": neutra_workload,
    "implicit": implicit_workload,
    "cnn": cnn_workload,
    "flax_nnx": flax_nnx_workload,
    "flax_linen": flax_linen_workload,
    "optax": optax_workload,
    "blackjax": blackjax_workload,
    "numpyro_svi": numpyro_svi_workload,
}


def child(name: str) -> None:
    import jax
    import numpy as np

    counts = {"compiles": 0, "lowerings": 0, "trace_s": 0.0, "lower_s": 0.0, "compile_s": 0.0}

    def listener(event, secs, **kw):
        if event == "/jax/core/compile/backend_compile_duration":
            counts["compiles"] += 1
            counts["compile_s"] += secs
        elif event == "/jax/core/compile/jaxpr_to_mlir_module_duration":
            counts["lowerings"] += 1
            counts["lower_s"] += secs
        elif event == "/jax/core/compile/jaxpr_trace_duration":
            counts["trace_s"] += secs

    def raw(o):
        if jax.dtypes.issubdtype(getattr(o, "dtype", None), jax.dtypes.prng_key):
            o = jax.random.key_data(o)  # a typed PRNG key (Flax NNX's Rngs state)
        return np.asarray(o).tobytes()

    jax.monitoring.register_event_duration_secs_listener(listener)
    t0 = time.perf_counter()
    outs = WORKLOADS[name]()
    wall = time.perf_counter() - t0
    digest = hashlib.sha256(b"".join(raw(o) for o in outs)).hexdigest()
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
                "trace_hits",
                "trace_persist_hits",
                "trace_persist_writes",
            )
        }
        if st.get("trace_persist_misses"):
            stats["trace_persist_misses"] = st["trace_persist_misses"]
        if st.get("trace_miss_reasons"):  # (why a call was not reused, nor persisted)
            stats["trace_miss_reasons"] = st["trace_miss_reasons"]
        if st.get("trace_unrecorded"):  # (why a trace was not recorded, nor stored)
            stats["trace_unrecorded"] = st["trace_unrecorded"]
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
        "in Python; NumPyro's SVI steps then trace as one of several programs, whose "
        "outputs differ from stock's by rounding, so 'bitwise' compares different programs)",
    )
    ap.add_argument("--pcache-only", action="store_true", help="skip JAX's own cache rows")
    ap.add_argument("--remote", action="store_true", help="also a fleet of two hosts on Redis")
    ap.add_argument("--warm-runs", type=int, default=1, help="warm pcache processes to run")
    ap.add_argument(
        "--trace-persist",
        action="store_true",
        help="also pcache with JAX_PCACHE_TRACE_PERSIST=1 (cold, then warm): persisted traces",
    )
    ap.add_argument(
        "--hash-seeds",
        help="comma-separated PYTHONHASHSEEDs: stock and pcache (one shared directory) "
        "per seed, each pcache process compared with stock of its own seed",
    )
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(args.child)
    if args.hash_seeds:
        return hash_orders(args.workloads.split(","), args.hash_seeds.split(","), args.libs)
    if args.hash_seed != "random":
        os.environ["PYTHONHASHSEED"] = args.hash_seed
    summary = []
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
            rows += [
                (f"pcache, warm {i}", run(name, {"JAX_PCACHE_DIR": str(pc)}, args.libs))
                for i in range(2, args.warm_runs + 1)
            ]
            if args.trace_persist:
                tp = {
                    "JAX_PCACHE_DIR": str(Path(tmp, "pcache-tp")),
                    "JAX_PCACHE_TRACE_PERSIST": "1",
                }
                rows += [
                    ("persisted, cold", run(name, tp, args.libs)),
                    ("persisted, warm", run(name, tp, args.libs)),
                ]
                rows += [
                    (f"persisted, warm {i}", run(name, tp, args.libs))
                    for i in range(2, args.warm_runs + 1)
                ]
            if args.remote:
                rows += remote_rows(name, Path(tmp), args.libs)
        stock = rows[0][1]
        print(f"\n{name}")
        print(
            f"  {'run':<18}{'compiles':>9}{'lowerings':>10}{'trace s':>8}{'lower s':>8}"
            f"{'compile s':>10}{'work s':>8}{'process s':>10}  bitwise"
        )
        for label, r in rows:
            same = "yes" if r["digest"] == stock["digest"] else "NO"
            print(
                f"  {label:<18}{r['compiles']:>9}{r['lowerings']:>10}{r['trace_s']:>8.2f}"
                f"{r['lower_s']:>8.2f}{r['compile_s']:>10.2f}{r['wall']:>8.2f}"
                f"{r['process']:>10.2f}  {same}"
            )
        by_label = dict(rows)
        warm = by_label["pcache, warm"]
        print(f"  pcache cold: {by_label['pcache, cold']['pcache']}")
        print(f"  pcache warm: {warm['pcache']}")
        if args.trace_persist:
            cold_tp, warm_tp = by_label["persisted, cold"], by_label["persisted, warm"]
            ratio = cold_tp["trace_s"] / max(warm_tp["trace_s"], 1e-9)
            print(f"  persisted warm: {warm_tp['pcache']}")
            print(f"  persisted traces: trace seconds cold/warm {ratio:.1f}x")
            # (against warm pcache without them, each the median of its warm processes:
            # a collection landing inside one trace adds 50-100 ms to that process's)
            med = {
                kind: statistics.median(r["trace_s"] for label, r in rows if label.startswith(kind))
                for kind in ("pcache, warm", "persisted, warm")
            }
            print(
                f"  persisted traces: warm trace seconds {med['pcache, warm']:.3f} without, "
                f"{med['persisted, warm']:.3f} with (median of {args.warm_runs}): "
                f"{med['pcache, warm'] / max(med['persisted, warm'], 1e-9):.1f}x"
            )
        if args.remote:
            print(f"  remote, new host: {rows[-1][1]['pcache']}")
        ratios = [f"pcache {warm['wall'] / stock['wall']:.2f}x"]
        jax_warm = by_label.get("JAX cache, warm")
        if jax_warm:
            ratios.insert(0, f"JAX cache {jax_warm['wall'] / stock['wall']:.2f}x")
            ratios.append(f"pcache vs JAX cache {warm['wall'] / jax_warm['wall']:.2f}x")
        print(f"  warm work time vs stock: {', '.join(ratios)}")
        summary.append((name, stock, jax_warm, warm, rows))
    print_summary(summary)


def hash_orders(names: list, seeds: list, libs: str | None) -> None:
    """Per hash seed: stock JAX, and pcache on one directory shared by every seed."""
    for name in names:
        print(f"\n{name}: one pcache directory, a fresh process per PYTHONHASHSEED")
        print(
            f"  {'seed':<6}{'stock digest':<14}{'compiles':>9}{'disk hits':>10}  bitwise own stock"
        )
        with tempfile.TemporaryDirectory() as tmp:
            for seed in seeds:
                env = {"PYTHONHASHSEED": seed}
                stock = run(name, env, libs)
                pc = run(name, {**env, "JAX_PCACHE_DIR": str(Path(tmp, "pcache"))}, libs)
                st = pc["pcache"]
                same = "yes" if pc["digest"] == stock["digest"] else "NO"
                print(
                    f"  {seed:<6}{stock['digest'][:12]:<14}"
                    f"{st['compiles'] + st['hlo_compiles']:>9}{st['disk_hits']:>10}  {same}"
                )


def _reasons(d: dict) -> str:
    return ", ".join(f"{k} x{v}" for k, v in sorted(d.items())) or "0"


def print_summary(summary: list) -> None:
    """One Markdown row per workload: the pcache-warm process against stock."""
    print(
        "\n| workload | warm compiles | bypasses (warm) | nonpersistent (warm) "
        "| trace / lower / compile s, warm | bitwise stock (all runs) "
        "| warm vs stock | warm vs JAX's cache |"
    )
    print("|---|---:|---|---|---|---|---:|---:|")
    for name, stock, jax_warm, warm, rows in summary:
        st = warm["pcache"]
        bitwise = all(r["digest"] == stock["digest"] for _, r in rows)
        vs_jax = f"{warm['wall'] / jax_warm['wall']:.2f}x" if jax_warm else "-"
        # pcache's own XLA compiles (jit seam and HLO seam); JAX's compile event also
        # fires on a hit of JAX's cache interface, which the HLO seam serves.
        compiles = str(warm["compiles"])
        if "compiles" in st:
            compiles = str(st["compiles"] + st["hlo_compiles"])
            if st["hlo_hits"]:
                compiles += f" ({st['hlo_hits']} HLO-seam hits)"
        print(
            f"| {name} | {compiles} | {_reasons(st.get('bypass_reasons', {}))} "
            f"| {_reasons(st.get('nonpersistent_reasons', {}))} "
            f"| {warm['trace_s']:.2f} / {warm['lower_s']:.2f} / {warm['compile_s']:.2f} "
            f"| {'yes' if bitwise else 'NO'} | {warm['wall'] / stock['wall']:.2f}x | {vs_jax} |"
        )


if __name__ == "__main__":
    main()
