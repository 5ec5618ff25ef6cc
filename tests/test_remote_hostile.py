"""The remote tier under hostile input and a flaky network, against a real redis-server.

The attacker can write to Redis but holds no fleet key: it replaces values with
huge ones, squats leases, fills the key-ids set, names keys with any bytes. The
network: Redis killed and restarted under a running host, a Redis that answers
slowly. Hosts are real processes (tests/fleet_prog.py, 6 jitted programs) whose
peak memory (ru_maxrss) is compared with an honest run of the same kind.
"""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
import threading
import time
from pathlib import Path

import jsonschema
import pytest
from redis_helpers import (
    LatencyProxy,
    RedisServer,
    finish,
    host_env,
    make_remote,
    remote_warnings,
    run_host,
    start_host,
)

from pcache import _remote

ROOT = Path(__file__).resolve().parent.parent
MB = 1 << 20
RSS_SLACK = 50 * MB  # a hostile run's peak memory, over an honest one's
CLI = [sys.executable, "-m", "pcache.cli"]


def heads(srv, ns: str) -> list[bytes]:
    return sorted(srv.client().scan_iter(match=f"pcache:*:{ns}:*:e:*"))


def big_value(r, name: bytes | str, size: int) -> None:
    """``name`` set to ``size`` bytes, made by the server (the test sends a few)."""
    r.delete(name)
    r.setrange(name, size - 1, b"x")


def local_env(cache: Path) -> dict[str, str]:
    env = host_env(cache, "redis://unused", None, "unused")
    for k in [k for k in env if k.startswith("JAX_PCACHE_REMOTE")]:
        del env[k]
    return env


# -- unbounded reads --------------------------------------------------------------------


@pytest.mark.parametrize("where", ["chunk", "inline"])
def test_oversized_value_is_never_read(server, key, ns, tmp_path, stock, where):
    """A chunk of a valid entry replaced by 128 MB: refused by its length (the
    signed head says how many bytes to expect) before any byte of it is read. An
    entry whose value is stored with its head, grown to 128 MB after it: at most
    the head's and an inline value's bounds are read (2 MiB)."""
    small = {"JAX_PCACHE_REMOTE_CHUNK_BYTES": "2KB"} if where == "chunk" else {}

    def env(d):
        return host_env(tmp_path / d, server.url, key, ns, **small)

    first = run_host(env("a"))
    honest = run_host(env("b"))
    assert honest["compiles"] == 0 and honest["stats"]["remote_hits"] == 6
    # The hostile run compiles one program: compared with the larger of a run that
    # compiles and one that hits.
    honest["maxrss"] = max(honest["maxrss"], first["maxrss"])
    r = server.client()
    if where == "chunk":
        chunk = sorted(r.scan_iter(match=f"pcache:*:{ns}:*:c:*"))[0]
        big_value(r, chunk, 128 * MB)
        because = "not the length its head says"
    else:
        entry = sorted(r.scan_iter(match=f"pcache:*:{ns}:*:e:*"))[0]
        r.setrange(entry, 128 * MB - 1, b"x")  # the head and value, then 128 MB of zeros
        because = "its value does not match its head"
    res = run_host(env("c"))
    assert res["digests"] == stock
    assert res["compiles"] == 1 and res["stats"]["remote_hits"] == 5
    assert res["stats"]["remote_miss_reasons"] == {"tampered": 1}
    (warning,) = remote_warnings(res)
    assert "failed verification" in warning and because in warning
    extra = res["maxrss"] - honest["maxrss"]
    print(f"peak RSS: honest {honest['maxrss'] / MB:.0f} MB, 128 MB {where} {extra / MB:+.0f} MB")
    assert extra < RSS_SLACK
    # The host that compiled it replaced the entry: the next host hits all six.
    good = run_host(env("d"))
    assert good["compiles"] == 0 and good["stats"]["remote_hits"] == 6


def test_oversized_key_id_member_is_cut_and_quoted(server, key, ns, tmp_path, stock):
    """A 64 MB member (newlines, terminal escapes) in the namespace's key-ids set:
    the hosts read at most 64 bytes of it and log it quoted and cut."""
    honest = run_host(host_env(tmp_path / "a", server.url, key, ns + "h"))
    r = server.client()
    ids = f"{_remote.prefix_root(ns)}key-ids"
    r.eval(
        "redis.call('zadd', KEYS[1], ARGV[1], '\\n\\27[31mFAKE LOG LINE\\n' .. "
        "string.rep('x', 64 * 1024 * 1024))",
        1,
        ids,
        time.time(),
    )
    assert r.zcard(ids) == 1
    res = run_host(host_env(tmp_path / "b", server.url, key, ns))
    assert res["digests"] == stock and res["compiles"] == 6
    (warning,) = remote_warnings(res)
    assert "key ids pcache never writes" in warning
    assert "\n" not in warning and "\x1b" not in warning and len(warning) < 600
    assert r"\x1b[31mFAKE" in warning  # shown, quoted
    extra = res["maxrss"] - honest["maxrss"]
    print(f"peak RSS: honest {honest['maxrss'] / MB:.0f} MB, 64 MB key id {extra / MB:+.0f} MB")
    assert extra < RSS_SLACK


# -- leases pcache did not write ----------------------------------------------------------


def test_squatted_leases_cost_nothing(server, key, ns, tmp_path, stock):
    """Every program's lease squatted before the host starts, three ways: a 64 MB
    value with no expiry, pcache's own "void" with no expiry, a token-shaped value
    expiring in an hour (beyond the 5 s lease). None was written with the fleet
    key: each is void, taken over at once (one warning), never read whole, and the
    host waits for none of them (the default lock timeout is 600 s)."""
    honest = run_host(host_env(tmp_path / "a", server.url, key, ns))
    squat_ns = ns + "s"
    r = server.client()
    names = [
        h.replace(f":{ns}:".encode(), f":{squat_ns}:".encode()).replace(b":e:", b":l:")
        for h in heads(server, ns)
    ]
    assert len(names) == 6
    for i, name in enumerate(names):
        if i < 2:
            big_value(r, name, 64 * MB)
        elif i < 4:
            r.set(name, b"void")
        else:
            r.set(name, secrets.token_hex(24), px=3600_000)
    assert all(r.pttl(n) in (-1, *range(3_000_000, 3_600_001)) for n in names)
    env = host_env(tmp_path / "b", server.url, key, squat_ns, JAX_PCACHE_REMOTE_LEASE="5s")
    res = finish(start_host(env), timeout=200)
    assert res["digests"] == stock and res["compiles"] == 6
    assert res["stats"]["remote_writes"] == 6  # the leases taken over, the entries stored
    (warning,) = remote_warnings(res)
    assert "a lease pcache did not write" in warning and "\n" not in warning
    assert not any(r.exists(n) for n in names)  # released once stored
    cost = res["seconds"] - honest["seconds"]
    extra = res["maxrss"] - honest["maxrss"]
    print(f"6 squatted programs: {cost:+.2f} s over an honest host; peak RSS {extra / MB:+.0f} MB")
    assert cost < 5  # at most one lease time for all six (nothing waited, in fact)
    assert extra < RSS_SLACK


def test_lease_checks(server, ns):
    """What a waiter makes of a lease (in-process)."""
    a = make_remote(server, ns, lease=2.0, wait=30.0)
    b = make_remote(server, ns, lease=2.0, wait=30.0)
    r = server.client()
    held = a.claim("x")
    assert held.held and len(r.get(f"{a.prefix}l:x")) == _remote.LEASE_TOKEN_LEN
    # A live lease of the fleet key: waited for (until it is stored)...
    threading.Timer(0.5, lambda: (a.put("x", b"v", {}), a.release(held, True))).start()
    got = b.claim("x")
    assert got.outcome == "ready" and 0.3 < got.waited < 5
    # ...one signed with another key is not the fleet's: taken over at once.
    other = make_remote(server, ns, key=b"o" * 32, lease=2.0)
    name = f"{a.prefix}l:y"
    r.set(name, other.leases._token(name), px=2000)
    t0 = time.monotonic()
    assert b.claim("y").held and time.monotonic() - t0 < 1
    # A void lease with a sane expiry: compile at once, without a lease.
    r.set(f"{a.prefix}l:z", b"void", px=1500)
    assert b.claim("z").outcome == "absent"
    # A read-only host never takes a forged lease over: it compiles without one.
    r.set(f"{a.prefix}l:w", b"junk")
    reader = make_remote(server, ns, read_only=True, lease=2.0, wait=30.0)
    t0 = time.monotonic()
    assert reader.claim("w").outcome == "absent" and time.monotonic() - t0 < 1
    assert r.get(f"{a.prefix}l:w") == b"junk"
    # A lease key of another type: given up (compile here), the breaker stays closed.
    r.rpush(f"{a.prefix}l:v", b"x")
    assert b.claim("v").outcome == "off" and b.state == "on"


# -- recovery -----------------------------------------------------------------------------


def test_breaker_opens_backs_off_and_closes(tmp_path, ns):
    srv = RedisServer(tmp_path / "srv")
    port = srv.port
    try:
        rem = make_remote(srv, ns, timeout=0.5)
        assert rem.put("d", b"v" * 100, {})
        srv.kill()
        assert rem.get("d").miss == "off" and rem.state == "open"
        assert rem.get("d").miss == "off"  # open: no command sent, no new failure
        assert len(rem.errors) == 1
        assert 1.5 < rem.info()["retry_in"] <= 2.0
        time.sleep(2.1)
        assert rem.state == "half-open"
        assert rem.get("d").miss == "off"  # the probe fails: open twice as long
        assert rem.state == "open" and 3.5 < rem.info()["retry_in"] <= 4.0
        srv = RedisServer(tmp_path / "srv2", port=port)
        time.sleep(4.1)
        assert rem.get("d").miss == "missing"  # the probe succeeds (an empty server)
        assert rem.state == "on" and rem.info()["failures"] == 0
        assert rem.put("d", b"v" * 100, {}) and rem.get("d").raw == b"v" * 100
        assert [c for _, c, _ in rem.errors] == [
            "remote unavailable",
            "remote unavailable",
            "remote recovered",
        ]
    finally:
        srv.stop()


def test_redis_restarted_mid_run_sharing_resumes(key, tmp_path, stock):
    """Redis SIGKILLed after program 2 and restarted (empty) on the same port while
    the host runs: program 3 compiles locally (the breaker opens, one warning);
    after the backoff the same process shares again (programs 4-6 written to the
    new server, which then serves a new host)."""
    srv = RedisServer(tmp_path / "srv")
    port, resume = srv.port, tmp_path / "resume"
    env = host_env(tmp_path / "a", srv.url, key, "restart")
    host = start_host(
        env,
        *("--kill-redis-after", "2", "--redis-pid", str(srv.proc.pid)),
        *("--resume-file", str(resume), "--resume-sleep", "2.5"),
    )
    try:
        paused = Path(f"{resume}.paused")
        deadline = time.monotonic() + 300
        while not paused.exists() and host.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        srv.stop()
        srv = RedisServer(tmp_path / "srv2", port=port)
        resume.touch()
        res = finish(host)
        assert res["digests"] == stock and res["compiles"] == 6
        assert len(remote_warnings(res)) == 1, res["warnings"]
        st = res["stats"]
        assert st["remote"]["state"] == "on"
        assert st["remote_breaker_opens"] >= 1 and st["remote_recoveries"] == 1
        assert st["remote_writes"] == 2 + 3  # before the kill, and after the restart
        assert len(list(srv.client().scan_iter(match="pcache:*:e:*"))) == 3
        new = run_host(host_env(tmp_path / "b", srv.url, key, "restart"))
        assert new["compiles"] == 3 and new["stats"]["remote_hits"] == 3
        out = subprocess.run([*CLI, "stats", "--json"], env=env, capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        remote = json.loads(out.stdout)["tiers"]["remote"]
        assert remote["recoveries"] == 1 and remote["state"]["state"] == "on"
    finally:
        srv.stop()


def test_slow_redis_is_skipped(server, key, tmp_path, stock):
    """A Redis answering in 0.5 s (under the 1 s timeout): after three round trips
    the host skips it (one warning) and runs at local speed; `pcache stats` says
    so."""
    local = run_host(local_env(tmp_path / "local"), "--programs", "3")
    proxy = LatencyProxy(("127.0.0.1", server.port), 0.5)
    try:
        env = host_env(tmp_path / "a", proxy.url, key, "slow", JAX_PCACHE_REMOTE_TIMEOUT="1s")
        res = finish(start_host(env, "--programs", "3"), timeout=200)
    finally:
        proxy.close()
    assert res["digests"] == stock[:3] and res["compiles"] == 3
    (warning,) = remote_warnings(res)
    assert "too slow to pay off" in warning
    assert res["stats"]["remote"]["state"] == "slow"
    assert res["stats"]["remote_slow_skips"] == 1
    cost = res["seconds"] - local["seconds"]
    print(
        f"3 programs through a 0.5 s Redis: {res['seconds']:.2f} s, local {local['seconds']:.2f} s"
    )
    assert cost < 3.0  # three round trips, then local speed
    out = subprocess.run([*CLI, "stats", "--json"], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    schema = json.loads((ROOT / "schemas" / "cli-stats.schema.json").read_text())
    jsonschema.validate(data, schema)
    remote = data["tiers"]["remote"]
    assert remote["slow_skips"] == 1 and remote["state"]["state"] == "slow"
    text = subprocess.run([*CLI, "stats"], env=env, capture_output=True, text=True).stdout
    assert "Remote state" in text and "slow" in text


def test_bad_namespace_switches_only_the_remote_off(server, key, tmp_path, stock):
    env = host_env(tmp_path / "a", server.url, key, "a:b")
    for compiles in (6, 0):
        res = run_host(env)
        assert res["digests"] == stock and res["compiles"] == compiles
        (warning,) = remote_warnings(res)
        assert "namespace" in warning and "caching locally only" in warning
        assert res["stats"]["remote"]["state"] == "off"
    assert res["stats"]["disk_hits"] == 6


# -- maintenance and reach ------------------------------------------------------------------


def test_gc_other_formats_removes_undecodable_names(server, key, tmp_path):
    r = server.client()
    odd = b"pcache:r0e1:\xffns\x1b[2J:host:e:abc"
    r.set(odd, b"x")
    env = host_env(tmp_path / "a", server.url, key, "gc")
    out = subprocess.run([*CLI, "remote", "stats"], env=env, capture_output=True, text=True)
    assert out.returncode == 0 and "\x1b" not in out.stdout, out.stderr
    gc = [*CLI, "remote", "gc", "--other-formats", "--json"]
    first = subprocess.run(gc, env=env, capture_output=True, text=True)
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout)["entries_removed"] == 1
    assert not r.exists(odd)
    again = json.loads(subprocess.run(gc, env=env, capture_output=True, text=True).stdout)
    assert again["entries_removed"] == 0


def test_push_fills_a_new_remote(server, key, ns, tmp_path, stock):
    """A warm local store (never on a remote) pushed to a new namespace: a host
    with an empty directory then compiles nothing."""
    warm = tmp_path / "warm"
    assert run_host(local_env(warm))["compiles"] == 6
    env = host_env(warm, server.url, key, ns)
    push = [*CLI, "--dir", str(warm), "remote", "push", "--json"]
    out = subprocess.run(push, env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert got["pushed"] == 6 and got["present"] == 0 and got["namespace"] == ns
    again = json.loads(subprocess.run(push, env=env, capture_output=True, text=True).stdout)
    assert again["pushed"] == 0 and again["present"] == 6
    new = run_host(host_env(tmp_path / "new", server.url, key, ns))
    assert new["digests"] == stock
    assert new["compiles"] == 0 and new["stats"]["remote_hits"] == 6


def test_local_hits_upload_what_the_remote_lacks(server, key, ns, tmp_path, stock):
    """A host whose local store is warm fills a flushed remote as it hits locally
    (on its writer thread); a new host then compiles nothing."""
    env = host_env(tmp_path / "a", server.url, key, ns)
    assert run_host(env)["compiles"] == 6
    r = server.client()
    r.delete(*r.scan_iter(match=f"pcache:*:{ns}:*"))
    warm = run_host(env)
    assert warm["compiles"] == 0 and warm["stats"]["disk_hits"] == 6
    assert warm["stats"]["remote_uploads"] == 6
    assert len(heads(server, ns)) == 6
    again = run_host(env)  # present now: checked once, nothing sent
    assert again["stats"]["remote_uploads"] == 0
    new = run_host(host_env(tmp_path / "new", server.url, key, ns))
    assert new["compiles"] == 0 and new["stats"]["remote_hits"] == 6


def test_remote_hit_copies_local_off_the_critical_path(server, key, ns, tmp_path):
    """A remote hit returns while the writer thread is busy: the local copy is its
    job, done after (in-process)."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    import pcache

    x = np.linspace(0, 1, 8, dtype=np.float32)

    def f(v):
        return jnp.sin(v) * 3

    opts = dict(remote=server.url, remote_secret_file=key, remote_namespace=ns, preload=0)
    jax.clear_caches()
    with pcache.enabled(tmp_path / "a", raise_errors=True, **opts):
        want = np.asarray(jax.jit(f)(x))
        assert pcache._api.runtime().remote.flush(10)
    jax.clear_caches()

    def stored() -> int:
        with pcache.store.Store(tmp_path / "b" / "store") as st:
            return len(list(st.entries()))

    with pcache.enabled(tmp_path / "b", raise_errors=True, **opts):
        rem = pcache._api.runtime().remote
        gate = threading.Event()
        rem.submit(lambda: gate.wait(60))
        got = np.asarray(jax.jit(f)(x))  # a remote hit, the writer blocked
        assert pcache.stats()["remote_hits"] == 1 and stored() == 0
        gate.set()
        assert rem.flush(10) and stored() == 1
    assert got.tobytes() == want.tobytes()
