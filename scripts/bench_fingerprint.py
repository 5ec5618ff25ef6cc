"""Time pcache's jaxpr fingerprint against JAX lowering.

    .venv/bin/python scripts/bench_fingerprint.py [--layers 128] [--reps 5]

For each program the jaxpr is re-created every repetition (as when a user re-creates
``jit(grad(f))``): "cold" digests fresh jaxpr objects (fresh Python functions; only the memo of
interned avals/contexts can help);
"warm" digests the same objects again (cross-call memo hit); "lowering" is
``jax.jit(f).trace(x).lower()`` on fresh functions (jaxpr -> StableHLO only, no XLA
compilation, which costs far more). Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import time

import jax
import jax.numpy as jnp

from pcache import _canon


def _mlp_loss(params, x):
    for w in params:
        x = jnp.tanh(x @ w)
    return jnp.mean(x**2)


def _cases(layers: int):
    key = jax.random.key(0)
    params = [jax.random.normal(k, (32, 32)) * 0.1 for k in jax.random.split(key, layers)]
    x = jnp.ones((8, 32))

    # Each maker builds fresh Python function objects, so JAX cannot reuse any traced
    # jaxpr or lowering from an earlier repetition (its caches key on identity).
    def deep():
        def loss(params, x):
            return _mlp_loss(params, x)

        return jax.jit(jax.grad(jax.checkpoint(loss))), (params, x)

    def seed_mean():
        return jax.jit(jax.grad(lambda a: jnp.mean(a @ a.T))), (x,)

    def seed_lambda():
        return jax.jit(lambda a: jnp.sin(a) * 2 + 1), (x,)

    def seed_partial():
        def f(a, k):
            return jnp.sum(a * k)

        return jax.jit(functools.partial(f, k=3.0)), (x,)

    return [
        (f"jit(grad(checkpoint(mlp))) {layers} layers", deep),
        ("jit(grad(mean(x @ x.T)))", seed_mean),
        ("jit(lambda)", seed_lambda),
        ("jit(partial(f, k=3))", seed_partial),
    ]


def _ms(fn, reps: int) -> float:
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(ts)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=128)
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()

    rows = []
    for name, make in _cases(args.layers):
        fun, fargs = make()
        n_eqns = len(fun.trace(*fargs).jaxpr.eqns)

        def cold(make=make):
            fun, fargs = make()
            cj = fun.trace(*fargs).jaxpr
            t0 = time.perf_counter()
            _canon.jaxpr_digest(cj)
            return (time.perf_counter() - t0) * 1e3

        def warm(make=make):
            fun, fargs = make()
            cj = fun.trace(*fargs).jaxpr
            _canon.jaxpr_digest(cj)
            t0 = time.perf_counter()
            _canon.jaxpr_digest(cj)
            return (time.perf_counter() - t0) * 1e3

        def lower(make=make):
            fun, fargs = make()
            tr = fun.trace(*fargs)
            t0 = time.perf_counter()
            tr.lower()
            return (time.perf_counter() - t0) * 1e3

        med = lambda f: statistics.median(f() for _ in range(args.reps))  # noqa: E731
        c, w, lo = med(cold), med(warm), med(lower)
        rows.append((name, n_eqns, c, w, lo))

    print(f"jax {jax.__version__}, backend {jax.default_backend()}, median of {args.reps}\n")
    print(
        "| program | top eqns | fingerprint cold ms | fingerprint warm ms "
        "| lowering ms | cold / lowering |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    for name, n, c, w, lo in rows:
        print(f"| {name} | {n} | {c:.3f} | {w:.4f} | {lo:.2f} | {c / lo:.1%} |")


if __name__ == "__main__":
    main()
