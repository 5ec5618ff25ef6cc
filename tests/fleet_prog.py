"""One "host" of a fleet, for tests/test_remote.py and scripts/bench_fleet.py.

    python tests/fleet_prog.py [--programs N] [--scale S] [--kill-redis-after K --redis-pid PID]
                               [--die-in-compile] [--stock]

pcache is switched on by the environment only (JAX_PCACHE_DIR, JAX_PCACHE_REMOTE,
JAX_PCACHE_REMOTE_SECRET_FILE, ...), as a user's unchanged program would run.
Runs N distinct jitted programs on fixed inputs and prints one JSON line: the
sha256 of each result's bytes, backend compiles (jax.monitoring), pcache's
counters, the pcache warnings logged, and the seconds the programs took.

--kill-redis-after K  SIGKILL the Redis server after program K (a mid-run death)
--resume-file F       with --kill-redis-after: the remote writes of programs 1..K
                      flushed before the kill; after program K+1, create F.paused,
                      wait until F exists (the test restarted Redis), then sleep
                      --resume-sleep seconds before the next program
--die-in-compile      SIGKILL this process inside its first compile: a host that
                      dies while it holds the program's lease
--no-flush            print at once: the remote writes finish at exit
--time-lookups        time each pcache lookup that hits, by tier (local, remote),
                      less deserializing: "lookups" in the JSON (bench_fleet.py)
--summary             print one line for people instead of JSON
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import resource
import signal
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

COMPILES = [0]


def _listener(name, secs, **kw):
    if name == "/jax/core/compile/backend_compile_duration":
        COMPILES[0] += 1


jax.monitoring.register_event_duration_secs_listener(_listener)


class _Warnings(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def program(i: int, scale: int = 1):
    """Program ``i``: a small MLP step whose depth and activation depend on i
    (``scale`` times deeper, for compiles that cost what real ones do)."""
    act = (jnp.tanh, jnp.sin, jax.nn.relu, jax.nn.gelu)[i % 4]
    depth = (1 + i % 3 + i // 4) * scale

    def loss(w, x):
        h = x
        for _ in range(depth):
            h = act(h @ w)
        return jnp.mean(h**2) * (i + 1)

    return jax.jit(jax.value_and_grad(loss))


def _time_lookups(out: dict[str, list[float]]) -> None:
    """Time `Runtime.lookup` (memory, local store, remote) less the time in its
    ``load`` (deserializing the executable: the same work whichever tier it came
    from): each call that hit the local store or the remote, by tier."""
    from pcache import _cache

    real = _cache.Runtime.lookup

    def timed(self, key, load, *a, **kw):
        spent = [0.0]

        def timed_load(*la, **lkw):
            t = time.perf_counter()
            try:
                return load(*la, **lkw)
            finally:
                spent[0] += time.perf_counter() - t

        c = self.stats._c
        disk, remote = c["disk_hits"], c["remote_hits"]
        t0 = time.perf_counter()
        exe = real(self, key, timed_load, *a, **kw)
        dt = time.perf_counter() - t0 - spent[0]
        if c["remote_hits"] > remote:
            out["remote"].append(dt)
        elif c["disk_hits"] > disk:
            out["local"].append(dt)
        return exe

    _cache.Runtime.lookup = timed


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--programs", type=int, default=6)
    ap.add_argument("--scale", type=int, default=1, help="programs this many times deeper")
    ap.add_argument("--kill-redis-after", type=int, default=0)
    ap.add_argument("--redis-pid", type=int, default=0)
    ap.add_argument("--resume-file", default="")
    ap.add_argument("--resume-sleep", type=float, default=0.0)
    ap.add_argument("--die-in-compile", action="store_true")
    ap.add_argument("--stock", action="store_true", help="no pcache (JAX_PCACHE_* ignored)")
    ap.add_argument("--no-flush", action="store_true", help="leave remote writes to exit")
    ap.add_argument("--summary", action="store_true", help="one line for people, not JSON")
    ap.add_argument("--time-lookups", action="store_true")
    args = ap.parse_args()
    lookups: dict[str, list[float]] = {"local": [], "remote": []}
    if args.time_lookups:
        _time_lookups(lookups)
    if args.stock:
        for k in [k for k in os.environ if k.startswith("JAX_PCACHE_")]:
            del os.environ[k]
    warned = _Warnings()
    logging.getLogger("pcache").addHandler(warned)
    rng = np.random.default_rng(0)
    w = rng.standard_normal((48, 48), dtype=np.float32) / 7
    x = rng.standard_normal((16, 48), dtype=np.float32)
    if args.die_in_compile:
        from pcache import _cache

        real = _cache.Runtime._compile_and_fill

        def die(self, key, *a, **kw):
            os.kill(os.getpid(), signal.SIGKILL)
            return real(self, key, *a, **kw)

        _cache.Runtime._compile_and_fill = die
    digests = []
    t0 = time.perf_counter()
    for i in range(args.programs):
        value, grad = program(i, args.scale)(w, x)
        data = np.asarray(value).tobytes() + np.asarray(grad).tobytes()
        digests.append(hashlib.sha256(data).hexdigest())
        if args.kill_redis_after and i + 1 == args.kill_redis_after:
            if args.resume_file:  # the writes of programs 1..K landed first
                import pcache

                rt = pcache._api.runtime()
                if rt is not None and rt.remote is not None:
                    rt.remote.flush(30)
            os.kill(args.redis_pid, signal.SIGKILL)
        if args.resume_file and i == args.kill_redis_after:
            with open(args.resume_file + ".paused", "w"):
                pass  # program K+1 ran without Redis: the test may restart it now
            while not os.path.exists(args.resume_file):
                time.sleep(0.05)
            time.sleep(args.resume_sleep)
    seconds = time.perf_counter() - t0
    stats = {}
    if not args.stock:
        import pcache

        rt = pcache._api.runtime()
        if rt is not None and rt.remote is not None and not args.no_flush:
            rt.remote.flush(30)  # so the counters below include the writes
        stats = pcache.stats()
    if args.summary:
        tiers = stats.get("tiers", {})
        print(
            f"{args.programs} programs in {seconds:.2f} s: {COMPILES[0]} compiled here, "
            f"{tiers.get('local', {}).get('hits', 0)} local hits, "
            f"{tiers.get('remote', {}).get('hits', 0)} remote hits"
            + "".join(f"\n  warning: {w}" for w in warned.messages)
        )
        return 0
    print(
        json.dumps(
            {
                "digests": digests,
                "compiles": COMPILES[0],
                "seconds": seconds,
                "stats": stats,
                "warnings": warned.messages,
                "lookups": lookups,
                # peak resident memory of this process, in bytes
                "maxrss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
            }
        ),
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
