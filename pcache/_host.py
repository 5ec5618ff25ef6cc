"""Host classes: which hosts may run one another's executables. No JAX here.

An executable is shared through the remote tier only with hosts of its class:

- XLA:CPU compiles for the features of the host's CPU, so a CPU executable's class is
  the machine architecture and the CPU feature flags (`cpu_class`): code built for
  instructions this CPU lacks is never loaded.
- An accelerator's executable is built for the device, not the host's CPU: its class
  is the platform, the device kind and the platform version (the driver and runtime
  versions the backend reports), so hosts with different CPUs and the same GPUs share
  it (`host_class`).

The cache key holds the platform, its version and the device kinds as well; the class
keeps entries of different hardware in different key spaces of the remote (`pcache
remote stats` lists them by class).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import platform
import socket
import uuid

__all__ = ["cpu_class", "host_class", "host_class_of_meta"]


@functools.cache
def cpu_class() -> str:
    """The machine architecture and CPU feature flags, hashed."""
    return _cpu_class(platform.machine(), _cpu_flags())


def _cpu_flags() -> str:
    with contextlib.suppress(OSError):
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                name, _, value = line.partition(":")
                if name.strip().lower() in ("flags", "features"):
                    return " ".join(sorted(value.split()))
    # Unknown features: share with nobody but this host (never load code built for
    # instructions this CPU may lack).
    return f"host {socket.gethostname()} {uuid.getnode()}"


def _cpu_class(machine: str, flags: str) -> str:
    text = f"{machine}\0{flags}"
    return f"{machine or 'unknown'}-{hashlib.sha256(text.encode()).hexdigest()[:12]}"


@functools.lru_cache(maxsize=64)
def host_class(platform_name: str, platform_version: str, device_kind: str) -> str:
    """The class of an executable compiled for ``platform_name`` (JAX's backend
    platform: cpu, cuda, rocm, tpu...) on a device of ``device_kind``, with the
    backend's ``platform_version``. A CPU executable: this host's `cpu_class`."""
    if platform_name == "cpu":
        return cpu_class()
    text = f"{platform_name}\0{platform_version}\0{device_kind}"
    name = "".join(c for c in platform_name if c.isalnum())[:16] or "device"
    return f"{name}-{hashlib.sha256(text.encode()).hexdigest()[:12]}"


def host_class_of_meta(meta: dict) -> str | None:
    """The class of a stored entry, from its metadata (what the seams store with it:
    ``backend``, ``device_kind``, ``extra.platform_version``); None if it does not say."""
    extra = meta.get("extra") or {}
    backend, kind = meta.get("backend"), meta.get("device_kind")
    version = extra.get("platform_version") if isinstance(extra, dict) else None
    if not isinstance(backend, str) or not backend:
        return None
    if backend == "cpu":
        return cpu_class()
    if not isinstance(kind, str) or not isinstance(version, str):
        return None
    return host_class(backend, version, kind)
