"""Programs the persisted-trace tests run in fresh processes (`test_trace_persist`).

python -m tests.persist_prog patterns
    every seed pattern (`tests.progs.PATTERNS`) once
python -m tests.persist_prog module DIR
    ``jax.jit(pmod.step)(x)`` of the user module ``DIR/pmod.py``
python -m tests.persist_prog scenario FILE...
    reviews' scenarios (`tests/persist_scenarios`), each run as ``__main__`` with
    ``show`` (each step's dtype and bytes, or its exception) and ``x``, one after
    the other; ``PHASE`` (A, B) tells the first process from the second

Each prints one JSON line: the results' digests, the seconds JAX spent tracing
(``jax.monitoring``), and ``pcache.stats()`` when pcache is on (it is switched on
by ``JAX_PCACHE_DIR`` alone, with ``JAX_PCACHE_TRACE_PERSIST=1``).
"""

from __future__ import annotations

import json
import os
import sys

import jax

from tests import progs

SECONDS = {"trace": 0.0}


def _listener(name, secs, **kw):
    if name == "/jax/core/compile/jaxpr_trace_duration":
        SECONDS["trace"] += secs


jax.monitoring.register_event_duration_secs_listener(_listener)


def _report(digests: dict) -> None:
    stats = {}
    if os.environ.get("JAX_PCACHE_DIR"):
        import pcache

        stats = pcache.stats()
    print(json.dumps({"digests": digests, "trace_seconds": SECONDS["trace"], "stats": stats}))


def patterns() -> None:
    x, w = progs.inputs()
    digests = {}
    for name, step in progs.PATTERNS.items():
        digests[name] = progs.digest(step(x, w))
    _report(digests)


def module(where: str) -> None:
    sys.path.insert(0, where)
    import pmod

    x, _ = progs.inputs()
    digests = {}
    for i in range(2):
        digests[f"step{i}"] = progs.digest(jax.jit(pmod.step)(x))
    _report(digests)


def scenario(*paths: str) -> None:
    """Each file in turn, in this one process; per file: what it showed, and how
    many persisted traces were served to it."""
    import runpy

    import jax.numpy as jnp
    import numpy as np

    shown: list[str] = []
    served: dict = {}
    canaries: list[int] = []

    def show(tag, f):
        try:
            o = np.asarray(f())
            shown.append(f"{tag} {o.dtype} {o.tobytes().hex()}")
        except Exception as e:
            shown.append(f"{tag} EXC {type(e).__name__}")

    x = jnp.arange(3, dtype=jnp.float32)
    for path in paths:
        shown.append(f"## {os.path.basename(path)}")
        before = _served()
        try:
            runpy.run_path(
                path,
                init_globals=dict(show=show, x=x, jax=jax, np=np, jnp=jnp),
                run_name="__main__",
            )
        except Exception as e:
            shown.append(f"file EXC {type(e).__name__}")
        served[os.path.basename(path)] = _served() - before
        # A canary, the same in every process: served to B only when what this
        # file left behind (registrations, process state) keys as it did in A.
        before = _served()
        show("canary", lambda: jax.jit(_canary, static_argnums=1)(x, len(served)))
        canaries.append(_served() - before)
    served["canaries"] = canaries
    _report({"shown": shown, "served": served})


def _canary(a, k):
    # (a set of strings among the program's constants iterates in another order in
    # each process: review 60 found it made every process miss)
    return a * k + (1.0 if "canary" in {"canary", "train", "eval", "predict"} else 2.0)


def _served() -> int:
    if not os.environ.get("JAX_PCACHE_DIR"):
        return 0
    import pcache

    return pcache.stats()["trace_persist_hits"]


if __name__ == "__main__":
    {"patterns": patterns, "module": module, "scenario": scenario}[sys.argv[1]](*sys.argv[2:])
