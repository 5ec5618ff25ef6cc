"""Installing the seams into JAX, pointing them at a runtime, and clearing pcache's
in-process state with JAX's own caches.

`install(rt)` wraps the JAX functions named in `_compat.PATCH_POINTS` (once per
process; the wrappers stay and pass straight through while no runtime is set),
so `uninstall()` never disturbs executables JAX's own caches already hold.
"""

from __future__ import annotations

import logging
import os
import threading

from pcache import (
    _canon_rules,
    _compat,
    _hlo_seam,
    _jit_compile,
    _jit_seam,
    _memos,
    _module_watch,
    _replay,
    _served,
    _snapshots,
    _state,
    _trace,
)
from pcache._errors import Uncacheable
from pcache._key import CacheKey

logger = logging.getLogger("pcache")

_INSTALL_LOCK = threading.Lock()


class _CacheClearProxy:
    """Replaces a JAX cached function; keeps `cache_clear()` working for `jax.clear_caches`."""

    def __init__(self, fn, orig) -> None:
        self._fn, self._orig = fn, orig

    def __call__(self, *args, **kwargs):
        return self._fn(*args, **kwargs)

    def cache_clear(self) -> None:
        self._orig.cache_clear()

    def cache_info(self):
        return self._orig.cache_info()


class _ClearHook:
    """Registered with JAX's cache management, so `jax.clear_caches()` also empties
    pcache's in-process state; `jit(f).clear_cache()` does too (pcache cannot tell
    which entries were f's: it drops them all, and the store serves them again).
    Nothing of a cleared program stays alive in pcache."""

    def cache_clear(self) -> None:
        clear_in_memory(jax_caches=True)

    def cache_info(self):
        return None

    def cache_keys(self):
        return ()


_CLEAR_HOOK = _ClearHook()  # referenced here: JAX's registry holds it weakly


def clear_in_memory(*, jax_caches: bool = False) -> None:
    """Drop the memory tier, unused preloads and every in-process memo (with
    ``jax_caches``, also what pcache knew of JAX's own caches: `_memos`)."""
    rt = _state.rt
    if rt is not None:
        rt.clear_memory()
    _memos.clear(jax_caches=jax_caches)


def _jit_evict_wrapper(self):
    _state.ORIG["jit_evict"](self)
    clear_in_memory()


def install(rt) -> None:
    """Point the seams at runtime `rt` (idempotent)."""
    with _INSTALL_LOCK:
        _trace.clear()  # a new runtime starts with its own traces, like its memory tier
        _trace.MEMO.configure(rt.settings.max_memory_bytes)
        _state.rt = rt
        if _compat.JIT_SEAM:
            _install_jit_seam()
            _module_watch.note_loaded()  # (which modules there are: `_module_watch`)
            if rt.settings.trace_persist:
                # (now, not at the first lookup: an import between a call's key and
                # its trace reads as a setting changed while tracing)
                _snapshots.start()  # (library names: what each import bound)
                if _canon_rules.imported not in _snapshots.IMPORTED:
                    # (JAX's modules imported later: their registrations, proven)
                    _snapshots.IMPORTED.append(_canon_rules.imported)
                    _snapshots.BEGAN.append(_canon_rules.importing)
                from pcache import _lib_callbacks  # noqa: F401
                from pcache._compat import jaxpr_codec  # noqa: F401
            else:
                _snapshots.stop()
        else:
            logger.warning(
                "pcache: JAX %s is outside the versions whose jit seam pcache knows "
                "(%s to %s, exclusive); only the HLO-level seam is used, so tracing and "
                "lowering are not skipped.",
                _compat.JAX_VERSION,
                _compat.SUPPORTED[0],
                _compat.SUPPORTED[1],
            )
        _install_hlo_seam()


def uninstall() -> None:
    with _INSTALL_LOCK:
        _state.rt = None
        _trace.clear()
        _snapshots.stop()  # (imports as without pcache)
        # The wrappers stay in place and pass straight through with no runtime:
        # executables already handed to JAX's own caches keep working.


def _install_hlo_seam() -> None:
    if "compile_or_get_cached" in _state.ORIG or not _compat.HLO_SEAM:
        return
    _state.ORIG["compile_or_get_cached"] = _compat.patch(
        "compile_or_get_cached", _hlo_seam.compile_or_get_cached_wrapper
    )


def _install_jit_seam() -> None:
    if "lower" in _state.ORIG:
        return
    _replay.install_warning_hook()
    # pcache's wrapper frames are not user code: keep them out of filtered
    # tracebacks and out of the source locations JAX writes into the HLO.
    _compat.exclude_from_tracebacks(os.path.dirname(os.path.abspath(__file__)))
    _compat.register_clear_hook(_CLEAR_HOOK, "pcache (memory tier and memos)")
    from pcache._compat import traces

    traces.watch_canonicalize_handlers()  # (a registry JAX keeps in C++)
    from pcache import _canon

    _canon.lowering_key()  # (JAX's tables as they are now: what an override is told from)
    orig = _state.ORIG
    orig["jit_evict"] = _compat.patch("jit_evict", _jit_evict_wrapper)
    infer = _compat.current("infer_params")
    orig["infer_params"] = _compat.patch(
        "infer_params", _CacheClearProxy(_trace.infer_params_cached_wrapper, infer)
    )
    pjit_lower = _compat.current("pjit_lower")
    orig["pjit_lower"] = _compat.patch(
        "pjit_lower", _CacheClearProxy(_jit_seam.pjit_lower_wrapper, pjit_lower)
    )
    orig["lsc"] = _compat.patch("lsc", _jit_seam.lsc_wrapper)
    orig["devices"] = _compat.patch("devices", _jit_seam.device_assignment_wrapper)
    lower = _compat.current("lower")
    compile_ = _compat.current("compile")
    orig["compile"] = _compat.patch(
        "compile", _CacheClearProxy(_jit_compile.compilation_wrapper, compile_)
    )
    orig["stablehlo"] = _compat.patch("stablehlo", _jit_seam.stablehlo_wrapper)
    orig["run_python"] = _compat.patch("run_python", _served.run_python_pjit_wrapper)
    # Last: `lower` present in ORIG means "installed".
    orig["lower"] = _compat.patch("lower", _CacheClearProxy(_jit_seam.lowering_wrapper, lower))


def fingerprint(fun, args, kwargs) -> CacheKey:
    """The key `jax.jit(fun)(*args, **kwargs)` would be cached under, without lowering."""
    if not _compat.JIT_SEAM:
        raise Uncacheable("unsupported-jax", f"JAX {_compat.JAX_VERSION}")
    with _INSTALL_LOCK:
        _install_jit_seam()
    return _jit_seam.fingerprint(fun, args, kwargs)
