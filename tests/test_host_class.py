"""Host classes per backend: which hosts share an executable through the remote.

A CPU executable is shared only with hosts whose CPUs have the same features; an
accelerator's with hosts of the same platform, device kind and runtime versions,
whatever their CPUs. The CPU path runs for real (the class the jit seam computes
for this host's backend, and the key an entry lands under in a real Redis); the
accelerator path through the function that computes a class from its inputs.
"""

from __future__ import annotations

import platform
import types

import jax
import jax.numpy as jnp
import pytest
from redis_helpers import make_remote

from pcache import _host, _load
from pcache._hlo_seam import entry_meta

CUDA = "PJRT C API\ncuda 12080\ncudnn 90300\ncuda driver 12040"


def fake_backend(name: str, version: str, kind: str):
    device = types.SimpleNamespace(device_kind=kind, id=0)
    return types.SimpleNamespace(platform=name, platform_version=version), [device]


def test_cpu_class_is_this_hosts_features(monkeypatch):
    backend = jax.devices("cpu")[0].client
    cls = _load.host_class(backend, jax.devices("cpu"))
    assert cls == _host.cpu_class() and cls.startswith(f"{platform.machine()}-")
    # Another CPU model: another class (a CPU program may use instructions it lacks).
    other = _host._cpu_class("x86_64", "fpu sse sse2")
    assert other != _host._cpu_class("x86_64", "fpu sse sse2 avx512f")


def test_accelerator_class_is_device_kind_and_versions_only(monkeypatch):
    backend, devices = fake_backend("cuda", CUDA, "NVIDIA H100 80GB HBM3")
    cls = _load.host_class(backend, devices)
    assert cls.startswith("cuda-") and cls != _host.cpu_class()
    # Hosts with other CPUs (other feature flags): the same class for GPU programs.
    mine = _host.cpu_class()
    _host.host_class.cache_clear()
    _host.cpu_class.cache_clear()
    monkeypatch.setattr(_host, "_cpu_flags", lambda: "fpu some other cpu")
    try:
        assert _host.cpu_class() != mine
        assert _load.host_class(backend, devices) == cls
    finally:
        _host.host_class.cache_clear()
        _host.cpu_class.cache_clear()
    # Another device kind, another CUDA runtime or driver, another platform: another class.
    for name, version, kind in (
        ("cuda", CUDA, "NVIDIA A100-SXM4-80GB"),
        ("cuda", CUDA.replace("12080", "12090"), "NVIDIA H100 80GB HBM3"),
        ("cuda", CUDA.replace("driver 12040", "driver 12050"), "NVIDIA H100 80GB HBM3"),
        ("rocm", CUDA, "NVIDIA H100 80GB HBM3"),
    ):
        assert _load.host_class(*fake_backend(name, version, kind)) != cls


@pytest.mark.parametrize("name", ["cpu", "cuda", "tpu"])
def test_a_stored_entry_names_the_class_it_was_looked_up_under(name):
    """`pcache remote push` and uploads place a local entry by its metadata (what
    the seams store): the same key space its lookups read."""
    backend, devices = fake_backend(name, CUDA if name != "cpu" else "cpu", "Kind 1")
    meta = entry_meta(backend, devices, "f")
    assert _host.host_class_of_meta(meta) == _load.host_class(backend, devices)
    assert _host.host_class_of_meta({"extra": {}}) is None


def test_cpu_entries_land_in_the_cpu_class_key_space(server, ns, tmp_path, monkeypatch):
    """A real jit on CPU against a real Redis: the remote head is under this host's
    CPU class, and a host of another CPU class does not see it."""
    import pcache

    monkeypatch.setenv("JAX_PCACHE_RAISE_ERRORS", "1")
    fleet = tmp_path / "fleet.key"
    fleet.write_bytes(b"k" * 32)
    fleet.chmod(0o600)
    pcache.enable(tmp_path / "c", remote=server.url, remote_secret_file=fleet, remote_namespace=ns)
    try:
        jax.jit(lambda x: jnp.sin(x) * 3)(jnp.arange(5.0)).block_until_ready()
        rt = pcache._api.runtime()
        assert rt.remote.flush(30)
    finally:
        pcache.disable()
    r = server.client()
    heads = sorted(r.scan_iter(match=f"pcache:*:{ns}:*:e:*"))
    assert heads, "nothing was written to the remote"
    assert all(f":{ns}:{_host.cpu_class()}.".encode() in h for h in heads)
    other = make_remote(server, ns, key=b"k" * 32)
    digest = heads[0].rsplit(b":", 1)[1].decode()
    assert other.get(digest).raw is not None  # this host's class
    assert other.get(digest, cls="x86_64-000000000000").miss == "missing"


def test_push_dry_run_looks_in_each_entrys_key_space(server, ns, tmp_path, monkeypatch):
    """`pcache remote push --dry-run` counts an accelerator entry the remote holds
    (in that accelerator's key space) as present, as the real push finds it, not
    as one to push because this host's CPU key space lacks it."""
    import json
    import subprocess
    import sys

    from redis_helpers import host_env

    import pcache

    monkeypatch.setenv("JAX_PCACHE_RAISE_ERRORS", "1")
    fleet = tmp_path / "fleet.key"
    fleet.write_bytes(b"k" * 32)
    fleet.chmod(0o600)
    cache = tmp_path / "c"
    pcache.enable(cache, remote=server.url, remote_secret_file=fleet, remote_namespace=ns)
    try:
        jax.jit(lambda x: jnp.cos(x) + 2)(jnp.arange(4.0)).block_until_ready()
        rt = pcache._api.runtime()
        assert rt.remote.flush(30)
        # An entry compiled on a GPU host of the fleet, copied here (a bundle, say).
        backend, devices = fake_backend("cuda", CUDA, "NVIDIA H100 80GB HBM3")
        meta = entry_meta(backend, devices, "g")
        gpu = "ab" * 32
        rt.local.store.put(gpu, b"not an executable", meta=meta)
        stored = len(rt.local.store)
    finally:
        pcache.disable()
    other = make_remote(server, ns, key=b"k" * 32)
    assert other.put(gpu, b"not an executable", meta, cls=_host.host_class_of_meta(meta))
    env = host_env(cache, server.url, fleet, ns)
    out = subprocess.run(
        [sys.executable, "-m", "pcache.cli", "remote", "push", "--dry-run", "--json"],
        env=env,
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert (got["pushed"], got["present"]) == (0, stored), got
