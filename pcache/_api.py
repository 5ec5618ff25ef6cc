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


def enable(path: str | Path | None = None, **options: Any) -> Path:
    """Switch the cache on for this process; returns the cache directory.

    Args:
      path: cache directory; default ``$JAX_PCACHE_DIR``, else
        ``$XDG_CACHE_HOME/pcache`` or ``~/.cache/pcache`` (created with mode 0700).
      **options: any of the settings below, each defaulting to its ``JAX_PCACHE_*``
        variable, else its default (``pcache env`` lists them with their values).
        ``max_disk_bytes=None``: unbounded; ``remote=False``: no remote tier.

    Calling it again replaces the previous configuration.
    """
    settings = _config.Settings.resolve(path, **options)
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
    if env.get("disable") or env.get("path") is None:
        return None
    with _LOCK:
        if _RUNTIME is not None:
            return _RUNTIME.path
        return enable(env["path"])


def _document_enable() -> None:
    """`enable`'s keywords and their help, from the settings table (`OPTIONS`)."""
    import inspect

    params = [inspect.Parameter("path", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None)]
    lines = [enable.__doc__ or "", "    Settings (the keywords of ``**options``):\n"]
    for o in _config.OPTIONS:
        if o.keyword and o.name != "path":
            params.append(
                inspect.Parameter(o.name, inspect.Parameter.KEYWORD_ONLY, default=_config._UNSET)
            )
            lines.append(f"      {o.name}: {o.help} (``${o.env}``)")
    enable.__signature__ = inspect.Signature(params, return_annotation=Path)  # type: ignore[attr-defined]
    enable.__doc__ = "\n".join(lines) + "\n"


_document_enable()


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
    ``trace_miss_reasons``: why a jit call was traced; ``trace_unrecorded``: why a
    trace was not recorded for reuse), the remote tier's
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
        **{f"memory_{k}": v for k, v in rt.memory.stats().items()},
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
