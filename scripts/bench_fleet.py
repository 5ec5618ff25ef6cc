"""A fleet of hosts on one Redis: compiles per fleet, and a new host's time to warm.

    .venv/bin/python scripts/bench_fleet.py [--hosts 1,2,4,8] [--programs 6,12,24]
                                            [--plot docs/bench_fleet.png] [--parts 1,2,3]
                                            [--code DIR]

Each "host" is a new process with its own empty cache directory running
tests/fleet_prog.py (P distinct jitted MLP steps, 8 times deeper than the tests'
by default: --scale), configured by the environment alone. Beside pcache with the remote tier it runs, in the same session:

* stock JAX (every host compiles everything);
* JAX's own persistent cache on one directory shared by every host (what a
  network filesystem would give; JAX has no single-flight, so hosts starting
  together all compile);
* pcache with local directories only (every new host compiles).

Part 1, hosts x programs: H hosts start together on the same P programs; printed:
backend compiles summed over the fleet and the fleet's wall time.
Part 2, time to warm: a new host joins a fleet that has run the programs; printed:
its wall time (interpreter start to last result) and its programs' own time, and
the ratios to stock. Absolute times on a 2-core machine are noise; ratios are not.
Part 3, what a remote hit costs over a local hit: a host with a warm local store
and a host with an empty one and a warm remote run the same programs (scale 1);
each pcache lookup that hits is timed, less the time deserializing the executable
(the same work from either tier; tests/fleet_prog.py --time-lookups). Printed:
the median per tier and the difference (what the remote adds: its round trips,
decompression, verification and, before, the local copy). Then `pcache remote
push` fills a new namespace from the warm host's local store, and a host with an
empty directory runs the programs against it (printed: its compiles, expected 0).
--code DIR runs the hosts with the pcache of another checkout (e.g. `git archive`
of an older commit, for a before/after).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from redis_helpers import RedisServer, fleet_key  # noqa: E402

PROG = ROOT / "tests" / "fleet_prog.py"


def env_for(mode: str, work: Path, host: str, url: str, key: Path, ns: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JAX_PCACHE_", "JAX_COMP"))}
    env["PYTHONPATH"] = os.pathsep.join([*CODE, str(ROOT)])
    if mode == "jax-shared":
        env.update(
            JAX_COMPILATION_CACHE_DIR=str(work / "jax-shared"),
            JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
            JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="0",
        )
    elif mode in ("pcache-local", "pcache-remote"):
        env.update(JAX_PCACHE_DIR=str(work / f"{mode}-{host}"), JAX_PCACHE_PRELOAD="0")
        if mode == "pcache-remote":
            env.update(
                JAX_PCACHE_REMOTE=url,
                JAX_PCACHE_REMOTE_SECRET_FILE=str(key),
                JAX_PCACHE_REMOTE_NAMESPACE=ns,
            )
    return env


def hosts(
    mode: str, n: int, programs: int, work: Path, url, key, ns, tag, extra=(), scale=None
) -> dict:
    args = [sys.executable, str(PROG), "--programs", str(programs)]
    args += ["--scale", str(SCALE if scale is None else scale), *extra]
    if mode == "stock":
        args.append("--stock")
    t0 = time.perf_counter()
    procs = [
        subprocess.Popen(
            args,
            env=env_for(mode, work, f"{tag}{i}", url, key, ns),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(n)
    ]
    outs = []
    for p in procs:
        out, err = p.communicate()
        if p.returncode:
            raise SystemExit(f"{mode} host failed:\n{err[-3000:]}")
        outs.append(json.loads(out.strip().splitlines()[-1]))
    wall = time.perf_counter() - t0
    digests = {tuple(o["digests"]) for o in outs}
    return {
        "outs": outs,
        "wall": wall,
        "compiles": sum(o["compiles"] for o in outs),
        "work": max(o["seconds"] for o in outs),
        "digests": digests,
    }


SCALE = 8
CODE: list[str] = []  # --code: another checkout's pcache, first on the path
MODES = ("stock", "jax-shared", "pcache-local", "pcache-remote")


def main() -> int:
    global SCALE
    ap = argparse.ArgumentParser()
    ap.add_argument("--hosts", default="1,2,4,8")
    ap.add_argument("--programs", default="6,12,24")
    ap.add_argument("--plot", default="")
    ap.add_argument("--scale", type=int, default=SCALE, help="program depth multiplier")
    ap.add_argument("--parts", default="1,2,3")
    ap.add_argument("--code", default="", help="run the hosts with this checkout's pcache")
    ap.add_argument("--hit-programs", type=int, default=24)
    ap.add_argument("--hit-rounds", type=int, default=3)
    a = ap.parse_args()
    SCALE = a.scale
    parts = {int(x) for x in a.parts.split(",")}
    if a.code:
        CODE.append(str(Path(a.code).resolve()))
    host_counts = [int(x) for x in a.hosts.split(",")]
    program_counts = [int(x) for x in a.programs.split(",")]
    work = Path(tempfile.mkdtemp(prefix="pcache-bench-fleet-"))
    srv = RedisServer(work / "redis")
    key = fleet_key(work / "fleet.key")
    reference: dict[int, set] = {}
    part1: list[dict] = []
    part2: list[dict] = []
    try:
        if 1 in parts:
            part_one(host_counts, program_counts, work, srv, key, reference, part1)
        if 2 in parts:
            part_two(program_counts, work, srv, key, reference, part2)
        if 3 in parts:
            part_three(a.hit_programs, a.hit_rounds, work, srv, key)
        print("\nAll runs bitwise equal to stock JAX." if parts & {1, 2} else "")
    finally:
        srv.stop()
        shutil.rmtree(work, ignore_errors=True)
    if a.plot and parts >= {1, 2}:
        plot(part1, part2, Path(a.plot))
    return 0


def part_one(host_counts, program_counts, work, srv, key, reference, part1) -> None:
    print("Part 1: H hosts start together on the same P programs (empty caches)")
    print(f"{'P':>3} {'H':>3} " + " ".join(f"{m + ' compiles/wall':>28}" for m in MODES))
    p1 = program_counts[0]
    for h in host_counts:
        row = {"programs": p1, "hosts": h}
        cells = []
        for m in MODES:
            shutil.rmtree(work / "jax-shared", ignore_errors=True)
            r = hosts(m, h, p1, work, srv.url, key, f"p1-{h}", f"p1-{h}-")
            reference.setdefault(p1, r["digests"])
            assert r["digests"] == reference[p1], f"{m}: results differ from stock"
            row[m] = {"compiles": r["compiles"], "wall": r["wall"]}
            cells.append(f"{r['compiles']:>14} / {r['wall']:6.1f} s")
        print(f"{p1:>3} {h:>3} " + " ".join(f"{c:>28}" for c in cells), flush=True)
        part1.append(row)
    print()


def part_two(program_counts, work, srv, key, reference, part2) -> None:
    print("Part 2: a new host joins a fleet that ran the programs before (time to warm)")
    print(
        f"{'P':>3} "
        + " ".join(f"{m + ' wall (work, compiles)':>32}" for m in MODES)
        + "   remote / stock   remote / jax-shared"
    )
    for row_no, p in enumerate(program_counts):
        ns = f"p2-{row_no}-{p}"
        shutil.rmtree(work / "jax-shared", ignore_errors=True)
        # The fleet ran before (its hosts' local directories are not the new host's).
        hosts("jax-shared", 1, p, work, srv.url, key, ns, f"warmup-{row_no}-")
        hosts("pcache-remote", 1, p, work, srv.url, key, ns, f"warmup-{row_no}-")
        row = {"programs": p}
        cells = []
        for m in MODES:
            r = hosts(m, 1, p, work, srv.url, key, ns, f"new-{row_no}-")
            reference.setdefault(p, r["digests"])
            assert r["digests"] == reference[p], f"{m}: results differ from stock"
            row[m] = {"wall": r["wall"], "work": r["work"], "compiles": r["compiles"]}
            cells.append(f"{r['wall']:6.2f} s ({r['work']:5.2f} s, {r['compiles']:>2} c)")
        part2.append(row)
        ratio = row["pcache-remote"]["wall"] / row["stock"]["wall"]
        ratio_j = row["pcache-remote"]["wall"] / row["jax-shared"]["wall"]
        print(
            f"{p:>3} " + " ".join(f"{c:>32}" for c in cells) + f"   {ratio:13.2f}x"
            f"   {ratio_j:18.2f}x",
            flush=True,
        )


def part_three(programs: int, rounds: int, work: Path, srv, key) -> None:
    """A remote hit's cost over a local hit, per lookup (medians over the rounds)."""
    import statistics

    print(
        f"\nPart 3: a lookup that hits, local store vs remote ({programs} programs, scale 1, "
        f"{rounds} rounds)" + (f"; pcache from {CODE[0]}" if CODE else "")
    )
    ns, timing = f"p3-{os.getpid()}", ["--time-lookups"]
    hosts("pcache-remote", 1, programs, work, srv.url, key, ns, "p3-warm", scale=1)
    local: list[float] = []
    remote: list[float] = []
    for r in range(rounds):
        got = hosts("pcache-remote", 1, programs, work, srv.url, key, ns, "p3-warm", timing, 1)
        local += got["outs"][0]["lookups"]["local"]
        got = hosts("pcache-remote", 1, programs, work, srv.url, key, ns, f"p3-new{r}-", timing, 1)
        remote += got["outs"][0]["lookups"]["remote"]
    if not local or not remote:
        raise SystemExit(f"part 3: no hits timed (local {len(local)}, remote {len(remote)})")
    lm, rm = statistics.median(local), statistics.median(remote)
    print(f"  local hit:  median {lm * 1000:7.3f} ms over {len(local)} lookups")
    print(f"  remote hit: median {rm * 1000:7.3f} ms over {len(remote)} lookups")
    print(f"  a remote hit costs {(rm - lm) * 1000:+.3f} ms over a local hit", flush=True)
    # A new remote filled by `pcache remote push` from that warm local store.
    ns2 = f"{ns}-push"
    env = env_for("pcache-remote", work, "p3-warm0", srv.url, key, ns2)
    cli = [sys.executable, "-m", "pcache", "--dir", env["JAX_PCACHE_DIR"], "remote", "push"]
    out = subprocess.run([*cli, "--json"], env=env, capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(f"pcache remote push failed:\n{out.stderr[-2000:]}")
    pushed = json.loads(out.stdout)["pushed"]
    got = hosts("pcache-remote", 1, programs, work, srv.url, key, ns2, "p3-pushed", scale=1)
    hits = got["outs"][0]["stats"]["remote_hits"]
    print(f"  `pcache remote push` filled a new namespace with {pushed} entries; an empty")
    print(f"  host then compiled {got['compiles']} of {programs} programs ({hits} remote hits)")


def plot(part1: list[dict], part2: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = {
        "stock": "stock JAX",
        "jax-shared": "JAX's cache, shared dir",
        "pcache-local": "pcache, local only",
        "pcache-remote": "pcache + Redis tier",
    }
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    hs = [r["hosts"] for r in part1]
    for m in MODES:
        ax1.plot(hs, [r[m]["compiles"] for r in part1], marker="o", label=labels[m])
    ax1.set_xlabel(f"hosts starting together ({part1[0]['programs']} programs)")
    ax1.set_ylabel("backend compiles, whole fleet")
    ax1.set_title("Compiles per fleet")
    ax1.legend()
    ps = [r["programs"] for r in part2]
    for m in MODES:
        ax2.plot(ps, [r[m]["wall"] for r in part2], marker="o", label=labels[m])
    ax2.set_xlabel("programs")
    ax2.set_ylabel("seconds, process start to last result")
    ax2.set_title("A new host's time to warm")
    ax2.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    print(f"plot: {path}")


if __name__ == "__main__":
    sys.exit(main())
