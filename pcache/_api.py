"""Public functions: enable/disable, stats, fingerprint, explain."""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pcache import _config, _trace
from pcache._cache import Runtime
from pcache._errors import Uncacheable
from pcache._key import CacheKey

logger = logging.getLogger("pcache")

_LOCK = threading.RLock()
_RUNTIME: Runtime | None = None
_UNSET: Any = _config._UNSET


def enable(
    path: str | Path | None = None,
    *,
    max_disk_bytes: int | str | None = _UNSET,
    max_memory_bytes: int | str | None = _UNSET,
    raise_errors: bool | None = None,
    lock_timeout: float | str | None = None,
    explain: bool | None = None,
    preload: int | None = None,
    check: bool | None = None,
    lock_stale: float | str | None = None,
    trace_reuse: bool | None = None,
    remote: str | bool | None = None,
    remote_secret_file: str | Path | None = None,
    remote_namespace: str | None = None,
    remote_read_only: bool | None = None,
    remote_ttl: float | str | None = None,
    remote_timeout: float | str | None = None,
    remote_lease: float | str | None = None,
) -> Path:
    """Switch the cache on for this process; returns the cache directory.

    Args:
      path: cache directory; default ``$JAX_PCACHE_DIR``, else
        ``$XDG_CACHE_HOME/pcache`` or ``~/.cache/pcache`` (created with mode 0700).
      max_disk_bytes: byte bound of the on-disk store (an int or ``"10GB"``);
        default ``$JAX_PCACHE_MAX_DISK``, else 10 GB. ``None``: unbounded.
      max_memory_bytes: byte bound of the in-memory tier of ready executables;
        default ``$JAX_PCACHE_MAX_MEMORY``, else 1 GiB.
      raise_errors: raise cache failures instead of warning once per cause
        (default ``$JAX_PCACHE_RAISE_ERRORS``); for tests.
      lock_timeout: seconds (or ``"10m"``) to wait for another process that is
        compiling the same program before compiling it here too; default 600 s.
      lock_stale: stop waiting sooner when that process has not shown a heartbeat
        for this long (it is stopped or hung); default ``$JAX_PCACHE_LOCK_STALE``,
        else 30 s.
      explain: log, for each miss, which key parts differ from the nearest stored
        entries of the same function (default ``$JAX_PCACHE_EXPLAIN``).
      preload: at this program's first cached compile, load up to this many
        executables that its previous run used (in the order it used them) on a
        background thread, so a new process overlaps loading with tracing;
        default ``$JAX_PCACHE_PRELOAD``, else 256. ``0``: off.
      check: recompute every memoized digest, verdict and key from scratch and
        raise `pcache.CheckError` on any difference, and compare a loaded entry's
        recorded key parts with the fresh ones (default ``$JAX_PCACHE_CHECK``); for
        tests, like JAX's ``jax_compilation_cache_check_contents``. Under it, a
        call trace reuse would serve is traced too, and the two traces compared.
      trace_reuse: serve a re-created callable (``jax.jit(jax.grad(f))``, a lambda,
        a partial or a nested def built anew each step) the trace of an equal
        callable traced before, so it is not traced again (default
        ``$JAX_PCACHE_TRACE_REUSE``, else on). Callables are equal when built
        from the same code with equal captured values; see the README.
      remote: a Redis (or Valkey) URL, ``redis://host:port/db``, ``rediss://...``
        or ``unix:///path/to/socket?db=0``: a remote tier shared by a fleet, behind
        the local store (default ``$JAX_PCACHE_REMOTE``; ``False``: none). Needs a
        fleet key: ``remote_secret_file`` (default ``$JAX_PCACHE_REMOTE_SECRET_FILE``),
        a file only its owner may read. ``remote_namespace``, ``remote_read_only``,
        ``remote_ttl``, ``remote_timeout`` and ``remote_lease`` default to the
        ``JAX_PCACHE_REMOTE_*`` variables of the same names; see the README's
        "Fleet" section.

    Calling it again replaces the previous configuration.
    """
    settings = _config.Settings.resolve(
        path,
        max_disk_bytes=max_disk_bytes,
        max_memory_bytes=max_memory_bytes,
        raise_errors=raise_errors,
        lock_timeout=lock_timeout,
        lock_stale=lock_stale,
        explain=explain,
        preload=preload,
        check=check,
        trace_reuse=trace_reuse,
        remote=remote,
        remote_secret_file=remote_secret_file,
        remote_namespace=remote_namespace,
        remote_read_only=remote_read_only,
        remote_ttl=remote_ttl,
        remote_timeout=remote_timeout,
        remote_lease=remote_lease,
    )
    return _enable(settings)


def _enable(settings: _config.Settings) -> Path:
    global _RUNTIME
    from pcache import _install

    with _LOCK:
        _disable_locked()
        rt = Runtime(settings)
        _install.install(rt)
        _RUNTIME = rt
    logger.debug("pcache enabled at %s", settings.path)
    return rt.path


def enable_from_env() -> Path | None:
    """What the JAX plugin calls: enable at ``$JAX_PCACHE_DIR`` unless disabled."""
    env = _config.read_env()
    if env.disable or not env.dir:
        return None
    with _LOCK:
        if _RUNTIME is not None:
            return _RUNTIME.path
        return enable(env.dir)


def disable() -> None:
    """Switch the cache off; executables already in use keep working."""
    with _LOCK:
        _disable_locked()


def _disable_locked() -> None:
    global _RUNTIME
    if _RUNTIME is None:
        return
    from pcache import _install

    _install.uninstall()
    _RUNTIME.close()
    _RUNTIME = None


def is_enabled() -> bool:
    return _RUNTIME is not None


@contextlib.contextmanager
def enabled(path: str | Path | None = None, **kwargs: Any) -> Iterator[Path]:
    """``with pcache.enabled(path): ...`` enables the cache for a scope."""
    with _LOCK:
        previous = _RUNTIME.settings if _RUNTIME is not None else None
        where = enable(path, **kwargs)
    try:
        yield where
    finally:
        with _LOCK:
            if previous is None:
                _disable_locked()
            else:
                _enable(previous)


def runtime() -> Runtime | None:
    return _RUNTIME


def stats() -> dict[str, Any]:
    """Counters of this process: memory_hits, disk_hits, misses, compiles, bypasses
    (and ``bypass_reasons``), evictions, errors (and ``error_causes``), bytes_read,
    bytes_written, seconds_saved, trace_hits and trace_misses (and
    ``trace_miss_reasons``: why a jit call was traced), the remote tier's
    (``remote_hits``, ``remote_misses``, ...; ``remote``: its URL, namespace and
    state), ``tiers`` (hits, misses, bytes and errors of each tier), plus the
    memory tier's size and the trace memo's."""
    rt = _RUNTIME
    if rt is None:
        return {"enabled": False}
    out = rt.stats.snapshot()
    out.update(
        enabled=True,
        path=str(rt.path),
        memory_entries=len(rt.memory),
        memory_bytes=rt.memory.bytes,
        memory_max_bytes=rt.memory.max_bytes,
        trace_entries=len(_trace.MEMO),
        trace_bytes=_trace.MEMO.bytes,
        remote=rt.remote_info(),
    )
    return out


def clear_memory() -> None:
    """Empty the in-memory tier and drop preloaded executables nobody has used (the
    store is untouched; use ``pcache clear`` for that)."""
    from pcache import _install

    _install.clear_in_memory()


def key(fun, *args, **kwargs) -> CacheKey:
    """The full `CacheKey` (named parts) that ``jax.jit(fun)(*args, **kwargs)`` uses."""
    from pcache import _install

    return _install.fingerprint(fun, args, kwargs)


def fingerprint(fun, *args, **kwargs) -> str:
    """The cache key (hex digest) that ``jax.jit(fun)(*args, **kwargs)`` would be cached under.

    If ``fun`` is already a ``jax.jit`` object its static_argnums, donate_argnums
    and shardings are honoured. Raises `pcache.Uncacheable` (with the reason)
    where the cache would bypass.
    """
    k = key(fun, *args, **kwargs)
    return k.digest


def explain(fun, *args, **kwargs) -> str:
    """Print and return the key parts of this call and, if it would miss, which parts
    differ from the nearest stored entries of the same function; for a call that is
    never cached or cached in memory only, why."""
    from pcache import _explain

    try:
        k = key(fun, *args, **kwargs)
    except Uncacheable as exc:
        text = f"never cached: {exc.reason}" + (f" ({exc.detail})" if exc.detail else "")
        text += "\n(compiled normally on every call; counted as a bypass)"
    else:
        text = _explain.explain_call(_RUNTIME, k, fun)
    print(text)
    return text


# -- warm-cache bundles -----------------------------------------------------------------


def _bundle_dir(directory: str | Path | None) -> Path:
    if directory is not None:
        return Path(directory).expanduser()
    rt = _RUNTIME
    return rt.path if rt is not None else _config.Settings.resolve().path


def export_bundle(
    path: str | Path,
    *,
    directory: str | Path | None = None,
    working_sets: tuple[str, ...] | list[str] = (),
    functions: tuple[str, ...] | list[str] = (),
    backends: tuple[str, ...] | list[str] = (),
    since: str | float | None = None,
    sign_key: str | Path | None = None,
) -> dict[str, Any]:
    """Write entries of a cache directory (the enabled one, else the configured
    one) into the bundle file ``path``, for `import_bundle` elsewhere; as
    ``pcache export``. ``working_sets``: programs (substrings of their names) whose
    entries go in with their order, so an importing run preloads them. Returns the
    summary ``pcache export --json`` prints."""
    from pcache import _bundle

    d = _bundle_dir(directory)
    rt = _RUNTIME
    if rt is not None and rt.path == d:
        rt.save_working_sets()  # this run's order, so far
    return _bundle.export_dir(
        d,
        path,
        working_sets=working_sets,
        functions=functions,
        backends=backends,
        since=None if since is None else _config.parse_age(since),
        sign_key=None if sign_key is None else _bundle.read_key(sign_key),
    ).to_json()


def import_bundle(
    path: str | Path,
    *,
    directory: str | Path | None = None,
    verify_key: str | Path | None = None,
    trust_unsigned: bool = False,
    device_check: bool = True,
    max_bytes: int | None = None,
) -> dict[str, Any]:
    """Store the entries of bundle ``path`` in a cache directory (the enabled one,
    else the configured one), signed with its secret; as ``pcache import``.

    Importing is a trust decision: an entry is a compiled program, and loading one
    can run anything, and nothing but a signature vouches that each executable is
    the program the bundle says. ``verify_key``: accept only a bundle signed with
    this key file. ``trust_unsigned=True``: import without a checked signature,
    trusting whoever could have written the file (without either, nothing is
    imported). Raises `pcache.BundleError` (nothing stored) for a bundle that is
    not whole, untrusted or malformed; entries for another JAX, backend or device
    kind are skipped and counted.
    """
    from pcache import _bundle

    d = _bundle_dir(directory)
    limit = max_bytes
    if limit is None:
        rt = _RUNTIME
        limit = (
            rt.settings.max_disk_bytes
            if rt is not None
            else _config.Settings.resolve().max_disk_bytes
        )
    return _bundle.import_dir(
        d,
        path,
        lambda: _bundle.probe_machine(device_check),
        verify_key=None if verify_key is None else _bundle.read_key(verify_key),
        trust_unsigned=trust_unsigned,
        max_bytes=limit,
    ).to_json()
