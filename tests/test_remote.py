"""The remote tier against a real redis-server: a fleet of real host processes, each
with its own empty cache directory, switched on by the environment alone.

Hosts run tests/fleet_prog.py (6 distinct jitted programs); results are compared
bitwise with the same program under stock JAX, compiles are counted with
jax.monitoring. Fault tests kill, pause and fill the server, hand hosts the wrong
key, tamper with stored values and SIGKILL a host holding a lease.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
from redis_helpers import (
    RedisServer,
    finish,
    fleet_key,
    free_port,
    host_env,
    make_remote,
    remote_warnings,
    run_host,
    start_host,
)

from pcache import _remote
from pcache._config import ConfigError, Settings

# -- the fleet ------------------------------------------------------------------------


def test_fleet_compiles_each_program_once(server, key, ns, tmp_path, stock):
    """8 hosts with empty local directories start together on the same 6 programs:
    6 compiles in all; a 9th host started later compiles nothing."""
    procs = [start_host(host_env(tmp_path / f"h{i}", server.url, key, ns)) for i in range(8)]
    results = [finish(p) for p in procs]
    for r in results:
        assert r["digests"] == stock
        assert r["warnings"] == []
    assert sum(r["compiles"] for r in results) == 6
    assert sum(r["stats"]["compiles"] for r in results) == 6
    assert sum(r["stats"]["remote_hits"] for r in results) == 8 * 6 - 6
    assert sum(r["stats"]["remote_writes"] for r in results) == 6
    ninth = run_host(host_env(tmp_path / "h9", server.url, key, ns))
    assert ninth["digests"] == stock
    assert ninth["compiles"] == 0
    assert ninth["stats"]["remote_hits"] == 6
    assert ninth["stats"]["tiers"]["remote"]["hits"] == 6
    # The remote hits were copied into its local store: its next run reads nothing remote.
    again = run_host(host_env(tmp_path / "h9", server.url, key, ns))
    assert again["compiles"] == 0
    assert again["stats"]["disk_hits"] == 6 and again["stats"]["remote_hits"] == 0


def test_zero_code_unix_socket_and_stats_cli(key, tmp_path, stock):
    sock = Path(f"/tmp/pcache-test-{uuid.uuid4().hex[:8]}.sock")
    srv = RedisServer(tmp_path / "srv", unix_socket=sock)
    try:
        first = run_host(host_env(tmp_path / "a", srv.url, key, "sock"))
        second = run_host(host_env(tmp_path / "b", srv.url, key, "sock"))
        assert first["digests"] == second["digests"] == stock
        assert first["compiles"] == 6 and second["compiles"] == 0
        assert second["stats"]["remote"]["state"] == "on"
        cli = [sys.executable, "-m", "pcache.cli"]
        env = host_env(tmp_path / "b", srv.url, key, "sock")
        out = subprocess.run([*cli, "stats", "--json"], env=env, capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        tiers = json.loads(out.stdout)["tiers"]
        assert tiers["remote"]["hits"] == 6 and tiers["remote"]["errors"] == 0
        out = subprocess.run([*cli, "remote", "ping"], env=env, capture_output=True, text=True)
        assert out.returncode == 0 and "PONG" in out.stdout, out.stderr
        out = subprocess.run(
            [*cli, "remote", "stats", "--json"], env=env, capture_output=True, text=True
        )
        (group,) = json.loads(out.stdout)["groups"]
        assert group["namespace"] == "sock" and group["entries"] == 6 and group["current_format"]
        out = subprocess.run(
            [*cli, "remote", "gc", "--all", "--json"], env=env, capture_output=True, text=True
        )
        assert json.loads(out.stdout)["entries_removed"] == 6
        assert srv.client().dbsize() == 0
    finally:
        srv.stop()
        sock.unlink(missing_ok=True)


def test_writes_pending_at_exit_are_not_lost(server, key, ns, tmp_path):
    res = run_host(host_env(tmp_path / "a", server.url, key, ns), "--no-flush")
    assert res["compiles"] == 6
    r = server.client()
    assert len(list(r.scan_iter(match=f"pcache:*:{ns}:*:e:*"))) == 6
    assert not list(r.scan_iter(match=f"pcache:*:{ns}:*:l:*"))  # every lease released


def test_namespaces_and_read_only_hosts(server, key, ns, tmp_path, stock):
    reader = run_host(
        host_env(tmp_path / "r1", server.url, key, ns, JAX_PCACHE_REMOTE_READ_ONLY="1")
    )
    assert reader["compiles"] == 6 and reader["stats"]["remote_writes"] == 0
    assert not list(server.client().scan_iter(match=f"pcache:*:{ns}:*"))
    run_host(host_env(tmp_path / "w", server.url, key, ns))
    other = run_host(host_env(tmp_path / "o", server.url, key, ns + "x"))
    assert other["compiles"] == 6 and other["stats"]["remote_hits"] == 0
    reader = run_host(
        host_env(tmp_path / "r2", server.url, key, ns, JAX_PCACHE_REMOTE_READ_ONLY="1")
    )
    assert reader["digests"] == stock
    assert reader["compiles"] == 0 and reader["stats"]["remote_hits"] == 6


def test_ttl_expires_entries(server, key, ns, tmp_path):
    run_host(host_env(tmp_path / "a", server.url, key, ns, JAX_PCACHE_REMOTE_TTL="3s"))
    names = list(server.client().scan_iter(match=f"pcache:*:{ns}:*:*"))
    assert names and all(0 < server.client().pttl(n) <= 3000 for n in names)
    time.sleep(3.5)
    assert not list(server.client().scan_iter(match=f"pcache:*:{ns}:*:*"))


# -- faults -------------------------------------------------------------------------------


def test_redis_killed_mid_run(key, tmp_path, stock):
    srv = RedisServer(tmp_path / "srv")
    try:
        env = host_env(tmp_path / "a", srv.url, key, "kill")
        res = run_host(env, "--kill-redis-after", "3", "--redis-pid", str(srv.proc.pid))
    finally:
        srv.stop()
    assert res["digests"] == stock
    assert res["compiles"] == 6
    assert len(remote_warnings(res)) == 1, res["warnings"]
    assert res["stats"]["remote"]["state"] in ("open", "half-open")  # retried later


def test_redis_never_reachable(key, tmp_path, stock):
    url = f"redis://127.0.0.1:{free_port()}/0"
    t0 = time.monotonic()
    res = run_host(host_env(tmp_path / "a", url, key, "none"))
    assert time.monotonic() - t0 < 120
    assert res["digests"] == stock and res["compiles"] == 6
    (warning,) = remote_warnings(res)
    assert "off until it answers again" in warning
    assert res["stats"]["remote"]["state"] in ("open", "half-open")
    # One failure, then one per retry (2 s, 4 s, ... apart), never one per program.
    assert 1 <= res["stats"]["tiers"]["remote"]["errors"] <= 3


def test_redis_answering_slowly(key, tmp_path, stock):
    """A server that stops answering: the host waits one timeout (0.5 s), not the
    pause (20 s), then goes on locally."""
    srv = RedisServer(tmp_path / "srv")
    try:
        srv.client().execute_command("CLIENT", "PAUSE", "20000", "ALL")
        env = host_env(tmp_path / "a", srv.url, key, "slow", JAX_PCACHE_REMOTE_TIMEOUT="0.5s")
        res = run_host(env)
    finally:
        srv.stop()
    assert res["digests"] == stock and res["compiles"] == 6
    assert len(remote_warnings(res)) == 1, res["warnings"]
    assert "Timeout" in res["stats"]["remote"]["reason"]
    assert res["seconds"] < 15  # the programs' own time: compiles plus one timeout


def test_remote_full_is_read_only(key, tmp_path, stock):
    srv = RedisServer(tmp_path / "srv")
    try:
        run_host(host_env(tmp_path / "a", srv.url, key, "full"))  # 6 entries stored
        srv.client().config_set("maxmemory", "1")
        srv.client().config_set("maxmemory-policy", "noeviction")
        hit = run_host(host_env(tmp_path / "b", srv.url, key, "full"))
        assert hit["compiles"] == 0 and hit["warnings"] == []  # reads work when full
        res = run_host(host_env(tmp_path / "c", srv.url, key, "full2"))
    finally:
        srv.stop()
    assert res["digests"] == stock and res["compiles"] == 6
    (warning,) = remote_warnings(res)
    assert "full" in warning
    assert res["stats"]["remote"]["state"] == "read-only"


def test_wrong_fleet_key(server, key, ns, tmp_path, stock):
    run_host(host_env(tmp_path / "a", server.url, key, ns))
    other = fleet_key(tmp_path / "other.key")
    res = run_host(host_env(tmp_path / "b", server.url, other, ns))
    assert res["digests"] == stock and res["compiles"] == 6
    (warning,) = remote_warnings(res)
    assert "other fleet keys" in warning and "JAX_PCACHE_REMOTE_SECRET_FILE" in warning
    assert res["stats"]["remote_hits"] == 0
    # Each key has its own key space: the fleet's entries were left alone, and a
    # host with the right key still hits.
    good = run_host(host_env(tmp_path / "c", server.url, key, ns))
    assert good["compiles"] == 0 and good["stats"]["remote_hits"] == 6


@pytest.mark.parametrize("where", ["inline", "chunk", "head"])
def test_tampered_remote_value(server, key, ns, tmp_path, stock, where):
    """A byte of a value changed (stored with its head, or in a chunk: values
    over JAX_PCACHE_REMOTE_CHUNK_BYTES), or a signed field of a head."""
    small = {"JAX_PCACHE_REMOTE_CHUNK_BYTES": "2KB"} if where == "chunk" else {}
    run_host(host_env(tmp_path / "a", server.url, key, ns, **small))
    r = server.client()
    kind = ":c:" if where == "chunk" else ":e:"
    names = [n for n in r.scan_iter(match=f"pcache:*:{ns}:*") if kind in n.decode()]
    assert (
        len(names) >= 6 and len({n.split(b":")[-3 if where == "chunk" else -1] for n in names}) == 6
    )
    for n in names:
        value = bytearray(r.get(n))
        if where == "head":  # a signed field changed: the signature no longer holds
            value = bytearray(bytes(value).replace(b'"compile_seconds":', b'"compile_seconds":9'))
        elif where == "inline":  # the value after the head's two lines
            head = len(_remote.split_entry(bytes(value))[1]) + 66
            assert len(value) > head + 100
            value[head + (len(value) - head) // 2] ^= 0x55
        else:
            value[len(value) // 2] ^= 0x55
        r.set(n, bytes(value))
    res = run_host(host_env(tmp_path / "b", server.url, key, ns))
    assert res["digests"] == stock and res["compiles"] == 6
    (warning,) = remote_warnings(res)
    assert "failed verification" in warning
    assert res["stats"]["remote_miss_reasons"] == {"tampered": 6}
    # The forged entries were replaced with good ones.
    good = run_host(host_env(tmp_path / "c", server.url, key, ns))
    assert good["compiles"] == 0 and good["stats"]["remote_hits"] == 6


def test_holder_killed_while_holding_its_lease(server, key, ns, tmp_path, stock):
    """A host SIGKILLed inside its compile, holding the lease: another host waits
    at most the lease (8 s: longer than the next host takes to start on a loaded
    machine) for it, then takes over."""
    env = host_env(tmp_path / "a", server.url, key, ns, JAX_PCACHE_REMOTE_LEASE="8s")
    dead = start_host(env, "--die-in-compile")
    dead.communicate(timeout=300)
    assert dead.returncode == -9
    leases = [n for n in server.client().scan_iter(match=f"pcache:*:{ns}:*:l:*")]
    assert len(leases) == 1  # it died holding the first program's lease
    res = run_host(host_env(tmp_path / "b", server.url, key, ns, JAX_PCACHE_REMOTE_LEASE="8s"))
    assert res["digests"] == stock and res["compiles"] == 6
    assert res["stats"]["remote_takeovers"] == 1
    assert res["warnings"] == []
    assert res["seconds"] < 8 + 30  # one lease of waiting, plus six compiles


def test_fleet_key_must_be_private(server, ns, tmp_path, stock):
    loose = fleet_key(tmp_path / "loose.key")
    loose.chmod(0o644)
    res = run_host(host_env(tmp_path / "a", server.url, loose, ns))
    (warning,) = remote_warnings(res)
    assert "JAX_PCACHE_REMOTE_SECRET_FILE" in warning and "readable by others" in warning
    assert res["digests"] == stock and res["stats"]["remote"]["state"] == "off"
    res = run_host(host_env(tmp_path / "b", server.url, None, ns))
    (warning,) = remote_warnings(res)
    assert "JAX_PCACHE_REMOTE_SECRET_FILE" in warning
    assert not list(server.client().scan_iter(match=f"pcache:*:{ns}:*"))


# -- the Remote object itself -------------------------------------------------------------


def test_chunked_values_are_verified_whole(server, ns):
    rem = make_remote(server, ns, chunk_bytes=1000)
    value = os.urandom(20_000)  # incompressible: 20+ chunks
    meta = {"backend": "cpu", "extra": {"replay": {"x": 1}, "hmac": "local only"}}
    assert rem.put("d1", value, meta) > 20_000
    got = rem.get("d1")
    assert got.raw == value and got.head.chunks >= 20
    assert got.head.extra == {"replay": {"x": 1}}  # the local signatures are never sent
    assert rem.put("d1", b"other", meta) == 0  # an entry is never overwritten...
    chunks = sorted(server.client().keys(f"{rem.prefix}c:d1:*"))
    server.client().delete(chunks[3])
    assert rem.get("d1").miss == "incomplete"
    assert rem.put("d1", value, meta, replace=True)  # ...unless it is broken
    assert rem.get("d1").raw == value
    assert len(server.client().keys(f"{rem.prefix}c:d1:*")) == len(chunks)  # old ones gone
    other = make_remote(server, ns, key=b"q" * 32)
    assert other.get("d1").miss == "missing"  # another key's space
    assert rem.errors == [] and other.errors == []


def test_lease_single_flight_and_expiry(server, ns):
    a = make_remote(server, ns, lease=0.6, wait=1.0)
    b = make_remote(server, ns, lease=0.6, wait=1.0)
    held = a.claim("d")
    assert held.held
    t0 = time.monotonic()
    assert b.claim("d").outcome == "timeout"  # renewed past its 0.6 s expiry
    assert 0.9 < time.monotonic() - t0 < 2.0
    a.put("d", b"v", {})
    assert b.claim("d").outcome == "ready"
    a.release(held)
    # A read-only host takes no lease but waits for the host that holds one.
    reader = make_remote(server, ns, read_only=True, wait=5.0)
    assert reader.claim("r").outcome == "absent"
    r_lease = a.claim("r")
    threading.Timer(0.5, lambda: (a.put("r", b"v", {}), a.release(r_lease, True))).start()
    got = reader.claim("r")
    assert got.outcome == "ready" and 0.4 < got.waited < 2.0
    assert not reader.client.exists(f"{reader.prefix}l:r")
    assert a.claim("e").held
    a.leases.forget()  # a holder that stops renewing (dead): its lease expires
    late = make_remote(server, ns, lease=0.6, wait=5.0).claim("e")
    assert late.held and late.took_over and late.waited < 1.5


def test_waiters_compile_at_once_when_the_holder_stores_nothing(server, ns):
    a = make_remote(server, ns)  # a 30 s lease
    b = make_remote(server, ns)
    lease = a.claim("v")
    threading.Timer(0.3, lambda: a.release(lease)).start()  # e.g. a compile error
    got = b.claim("v")
    assert got.outcome == "absent" and got.waited < 2.0


def test_a_broken_entry_is_not_ready_until_replaced(server, ns):
    """A waiter that found an entry unusable waits for its replacement, not for
    the broken one it already saw."""
    a = make_remote(server, ns, chunk_bytes=1000)
    b = make_remote(server, ns, chunk_bytes=1000)
    value = os.urandom(5000)
    a.put("s", value, {})
    r = server.client()
    chunk = sorted(r.keys(f"{a.prefix}c:s:*"))[0]
    r.set(chunk, b"x" * len(r.get(chunk)))
    assert b.get("s").miss == "tampered"
    lease = a.claim("s")

    def replace():
        a.put("s", value, {}, replace=True)
        a.release(lease, stored=True)

    threading.Timer(0.5, replace).start()
    got = b.claim("s")
    assert got.outcome == "ready" and got.waited > 0.3
    assert b.get("s").raw == value


def test_gc_ages_by_idle_time_and_never_touches_entries(server, ns):
    rem = make_remote(server, ns, chunk_bytes=1000)
    rem.put("old", os.urandom(1500), {})  # in two chunks
    r = server.client()
    orphan = f"{rem.prefix}c:gone:abcd:0"
    r.set(orphan, b"x")  # a write under way (its head not written yet)
    time.sleep(2.1)
    _remote.inventory(r, ns)
    assert _remote.gc(r, namespace=ns, older_than=60)["entries_removed"] == 0
    assert r.object("idletime", f"{rem.prefix}e:old") >= 2  # neither read it
    got = _remote.gc(r, namespace=ns, older_than=2)
    assert got["entries_removed"] == 1 and got["chunks_removed"] == 2
    assert r.exists(orphan)  # younger than an hour: perhaps still being written
    assert _remote.gc(r, namespace=ns, everything=True)["entries_removed"] == 0


def test_passwords_never_reach_logs_or_stats():
    assert _remote.redact("redis://u:pw@h:1/0") == "redis://u:***@h:1/0"
    assert (
        _remote.redact("unix:///tmp/r.sock?db=0&password=s3cret")
        == "unix:///tmp/r.sock?db=0&password=***"
    )
    assert "s3cret" not in _remote.redact("rediss://h:1/0?password=s3cret&ssl_cert_reqs=none")
    env = {**os.environ, "JAX_PCACHE_REMOTE": "redis://:s3cret@h:1/0"}
    out = subprocess.run(
        [sys.executable, "-m", "pcache.cli", "env"], env=env, capture_output=True, text=True
    )
    assert out.returncode == 0 and "s3cret" not in out.stdout and "***" in out.stdout
    bad = subprocess.run(
        [sys.executable, "-m", "pcache.cli", "remote", "--url", "redis://h:notaport/0", "ping"],
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 2 and "Traceback" not in bad.stderr


def test_settings_validation(tmp_path):
    with pytest.raises(ConfigError):
        Settings.resolve(tmp_path, environ={"JAX_PCACHE_REMOTE": "http://x"})
    # A malformed namespace is the remote tier's error (it alone is switched off).
    bad = Settings.resolve(tmp_path, remote="redis://x", remote_namespace="a b", environ={})
    with pytest.raises(_remote.RemoteError, match="namespace"):
        _remote.Remote(bad.remote, b"k" * 32)
    s = Settings.resolve(
        tmp_path,
        environ={
            "JAX_PCACHE_REMOTE": "redis://:pw@h:1/2",
            "JAX_PCACHE_REMOTE_TTL": "7d",
            "JAX_PCACHE_REMOTE_READ_ONLY": "1",
        },
    )
    assert s.remote.ttl == 7 * 86400 and s.remote.read_only
    assert _remote.redact(s.remote.url) == "redis://:***@h:1/2"
    assert (
        Settings.resolve(tmp_path, remote=False, environ={"JAX_PCACHE_REMOTE": "redis://h"}).remote
        is None
    )


def test_hlo_seam_programs_go_through_the_remote(server, key, ns, tmp_path):
    """Programs only JAX's HLO-level cache interface sees (a primitive with a param
    pcache cannot key) share the remote too; an entry is copied into the local
    store only once it loaded."""
    import jax
    import numpy as np
    from test_runtime import OPAQUE, _Opaque

    import pcache

    x = np.linspace(-1, 1, 64, dtype=np.float32)
    seen = []
    for host in ("a", "b"):
        jax.clear_caches()
        opts = dict(remote=server.url, remote_secret_file=key, remote_namespace=ns)
        with pcache.enabled(tmp_path / host, raise_errors=True, **opts):
            out = np.asarray(jax.jit(lambda v: OPAQUE.bind(v, tag=_Opaque()))(x)).tobytes()
            pcache._api.runtime().remote.flush(10)
            seen.append(pcache.stats())
        assert out == (x * 2).tobytes()
    a, b = seen
    assert a["hlo_compiles"] == 1 and a["remote_writes"] == 1
    assert b["hlo_compiles"] == 0 and b["hlo_hits"] == 1 and b["remote_hits"] == 1
    with pcache.store.Store(tmp_path / "b" / "store") as st:
        assert [e.key[:4] for e in st.entries()] == ["hlo-"]
