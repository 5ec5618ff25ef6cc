"""Programs the integration tests run in real subprocesses.

python -m tests.progs patterns CACHE_ROOT [--no-pcache]
    runs every seed pattern for N = 1, 10, 100 calls, each N against its own
    cache dir CACHE_ROOT/<pattern>-<N>, and prints one JSON line per run:
    {"pattern", "n", "compiles", "lowerings", "digest"} (digest: sha256 of the
    results' bytes, to compare bitwise with uncached JAX).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np

EVENTS = {
    "compile": "/jax/core/compile/backend_compile_duration",
    "lower": "/jax/core/compile/jaxpr_to_mlir_module_duration",
}
COUNTS = {"compile": 0, "lower": 0}


def _listener(name, secs, **kw):
    for k, ev in EVENTS.items():
        if name == ev:
            COUNTS[k] += 1


jax.monitoring.register_event_duration_secs_listener(_listener)


def f(x):
    return jnp.mean(x @ x.T)


@jax.jit
def inner(x, w):
    return jnp.tanh(x @ w)


def g(w, x):
    return jnp.sum(inner(x, w) ** 2)


def scaled(x, k):
    return jnp.sum(jnp.sin(x) * k)


def step_grad(x, w):
    return jax.jit(jax.grad(f))(x)


def step_checkpoint(x, w):
    return jax.jit(jax.value_and_grad(jax.checkpoint(g)))(w, x)


def step_lambda(x, w):
    return jax.jit(lambda a: jnp.cos(a) @ a)(x)


def step_partial(x, w):
    return jax.jit(functools.partial(scaled, k=3.0))(x)


def step_nested(x, w):
    def body(a):
        return jnp.exp(-a) * 2.0

    return jax.jit(body)(x)


def step_aot(x, w):
    return jax.jit(lambda a: jnp.sum(a * a, axis=0)).lower(x).compile()(x)


def step_train(x, w):
    """A train step: MLP loss, value_and_grad, SGD update, re-created every call."""

    def loss(params, batch):
        h = batch
        for wi, bi in params:
            h = jnp.tanh(h @ wi + bi)
        return jnp.mean(h**2)

    def train_step(params, batch):
        value, grads = jax.value_and_grad(loss)(params, batch)
        new = jax.tree_util.tree_map(lambda p, g: p - 0.1 * g, params, grads)
        return value, new

    bias = np.linspace(-0.5, 0.5, 64, dtype=np.float32)  # numpy: no eager op to compile
    params = [(w, bias), (x, bias[::-1].copy())]
    return jax.jit(train_step)(params, x)


PATTERNS = {
    "jit_grad": step_grad,
    "checkpoint_inner_jit": step_checkpoint,
    "lambda": step_lambda,
    "partial": step_partial,
    "nested_def": step_nested,
    "aot": step_aot,
    "train_step": step_train,
}


def inputs():
    x = np.linspace(-1, 1, 64 * 64, dtype=np.float32).reshape(64, 64)
    w = np.linspace(0, 2, 64 * 64, dtype=np.float32).reshape(64, 64)
    return jax.device_put(x), jax.device_put(w)


def digest(out) -> str:
    h = hashlib.sha256()
    for leaf in jax.tree_util.tree_leaves(out):
        a = np.asarray(leaf)
        h.update(str(a.dtype).encode() + str(a.shape).encode() + a.tobytes())
    return h.hexdigest()


def patterns(root: str, use_pcache: bool) -> None:
    import pcache

    x, w = inputs()
    for name, step in PATTERNS.items():
        # JAX alone gives every step the same result: one step says what it is.
        for n in (1, 10, 100) if use_pcache else (1,):
            if use_pcache:
                pcache.enable(os.path.join(root, f"{name}-{n}"))
            COUNTS.update(compile=0, lower=0)
            outs = [step(x, w) for _ in range(n)]
            jax.block_until_ready(outs)
            counted = dict(COUNTS)
            ds = {digest(o) for o in outs}
            print(
                json.dumps(
                    {
                        "pattern": name,
                        "n": n,
                        "compiles": counted["compile"],
                        "lowerings": counted["lower"],
                        "digest": sorted(ds),
                        "stats": pcache.stats() if use_pcache else {},
                    }
                ),
                flush=True,
            )
            if use_pcache:
                pcache.disable()


def six_functions(root: str) -> None:
    """Compile 6 distinct functions with pcache on; print how many backend compiles ran."""
    import pcache

    pcache.enable(root, lock_timeout=120)
    x, w = inputs()
    COUNTS.update(compile=0, lower=0)
    fns = [
        lambda a: jnp.sin(a) @ a,
        lambda a: jnp.cos(a).sum(axis=0),
        lambda a: jnp.tanh(a @ a.T).mean(),
        lambda a: jax.nn.relu(a) * 2.0,
        lambda a: jnp.cumsum(a, axis=1),
        jax.grad(lambda a: jnp.sum(jnp.sin(a) ** 2)),
    ]
    outs = [jax.jit(fn)(x) for fn in fns]
    jax.block_until_ready(outs)
    print(
        json.dumps(
            {
                "compiles": COUNTS["compile"],
                "stats": pcache.stats(),
                "digests": [digest(o) for o in outs],
            }
        ),
        flush=True,
    )


def preload(root: str, use_pcache: bool = True) -> None:
    """A program whose next run should preload: one small jit first (its lookup starts
    the preload), a wait for the preload thread (so counts are exact; PROG_PAUSE=0
    skips it), then five more functions including a train step. Prints stats,
    digests and keys."""
    import pcache

    if use_pcache:
        pcache.enable(root)
    x, w = inputs()
    COUNTS.update(compile=0, lower=0)
    first = jax.jit(lambda a: a + 1.0)
    outs = [first(x)]
    jax.block_until_ready(outs)
    if use_pcache and os.environ.get("PROG_PAUSE") != "0":
        # Let the preload finish (counts are then exact): wait for its thread.
        for pre in list(pcache._api.runtime().preloaded.preloaders.values()):
            pre._thread.join(30)
    fns = [
        (jax.jit(lambda a: jnp.sin(a) @ a), (x,)),
        (jax.jit(jax.grad(lambda a: jnp.sum(jnp.sin(a) ** 2))), (x,)),
        (jax.jit(lambda a, b: jnp.tanh(a @ b).mean()), (x, w)),
        (jax.jit(functools.partial(scaled, k=2.0)), (x,)),
    ]
    outs += [fn(*args) for fn, args in fns]
    outs.append(step_train(x, w))
    jax.block_until_ready(outs)
    keys = []
    if use_pcache:
        keys = [pcache.fingerprint(lambda a: a + 1.0, x)]
        keys += [pcache.fingerprint(fn, *args) for fn, args in fns]
    print(
        json.dumps(
            {
                "compiles": COUNTS["compile"],
                "stats": pcache.stats(),
                "digests": [digest(o) for o in outs],
                "keys": keys,
            }
        ),
        flush=True,
    )


def exit_early(root: str) -> None:
    """Start the preload (one lookup) and exit at once, while it may be mid-load."""
    import pcache

    pcache.enable(root)
    x, _ = inputs()
    jax.block_until_ready(jax.jit(lambda a: a + 1.0)(x))
    print(json.dumps({"preloaders": len(pcache._api.runtime().preloaded.preloaders)}), flush=True)


def env_only() -> None:
    """Never imports pcache: JAX_PCACHE_DIR alone must switch the cache on."""
    x, w = inputs()
    COUNTS.update(compile=0, lower=0)
    out = [jax.jit(jax.grad(f))(x) for _ in range(3)]
    jax.block_until_ready(out)
    print(
        json.dumps(
            {
                "compiles": COUNTS["compile"],
                "lowerings": COUNTS["lower"],
                "pcache_imported": "pcache._cache" in sys.modules,
                "digest": digest(out[0]),
            }
        ),
        flush=True,
    )


if __name__ == "__main__" and sys.argv[1] == "patterns":
    patterns(sys.argv[2], "--no-pcache" not in sys.argv)
elif __name__ == "__main__" and sys.argv[1] == "six":
    six_functions(sys.argv[2])
elif __name__ == "__main__" and sys.argv[1] == "preload":
    preload(sys.argv[2], "--no-pcache" not in sys.argv)
elif __name__ == "__main__" and sys.argv[1] == "exit-early":
    exit_early(sys.argv[2])
elif __name__ == "__main__" and sys.argv[1] == "env-only":
    env_only()
