"""The HLO-level seam: JAX's own persistent-cache interface, served from pcache's store.

Every compile the jit seam does not key (pmap, a jit seam bypass, compiles on a JAX
line outside `_compat.SUPPORTED`) reaches `compiler.compile_or_get_cached` with a
lowered module: keyed as JAX's own persistent cache keys it
(`compilation_cache.get_cache_key`), stored in the same store (``hlo-<key>``).
Lowering is not skipped here; only the XLA compile is.
"""

from __future__ import annotations

import contextlib
import contextvars
from typing import Any

from pcache import _compat, _state
from pcache._errors import Uncacheable

_HLO_OFF = contextvars.ContextVar("pcache_hlo_off", default=False)


@contextlib.contextmanager
def hlo_seam_off():
    """While the jit seam compiles a module it keyed itself: pass through."""
    token = _HLO_OFF.set(True)
    try:
        yield
    finally:
        _HLO_OFF.reset(token)


def compile_or_get_cached_wrapper(
    backend,
    computation,
    devices,
    compile_options,
    host_callbacks,
    executable_devices,
    pgle_profiler=None,
):
    """`compiler.compile_or_get_cached` served from pcache's store.

    Passes through when JAX's own persistent cache is configured (the user chose it
    for these compiles), for host callbacks (process-local, as JAX refuses them
    too) and profile-guided compiles. JAX's configuration and its cache object are
    left as they are.
    """

    def call():
        return _state.ORIG["compile_or_get_cached"](
            backend,
            computation,
            devices,
            compile_options,
            host_callbacks,
            executable_devices,
            pgle_profiler,
        )

    rt = _state.rt
    if (
        rt is None
        or _HLO_OFF.get()
        or host_callbacks
        or pgle_profiler is not None
        or _compat.jax_cache_configured()
    ):
        return call()
    try:
        key = _compat.hlo_cache_key(computation, devices, compile_options, backend)
        exe = rt.hlo_get(
            key,
            lambda raw: backend.deserialize_executable(raw, executable_devices, compile_options),
        )
    except Exception as exc:
        rt.error("hlo lookup", exc)
        return call()
    if exe is not None:
        return exe

    def compile_fn():
        with hlo_seam_off():
            exe = call()
        try:
            raw = _compat.serialize(exe, backend)
        except Uncacheable as exc:  # XLA would crash serializing it: nothing stored
            rt.bypass(exc.reason, f"{_compat.module_name(computation)}: {exc.detail}")
            raw = None
        except Exception as exc:  # some backends cannot serialize: nothing stored
            rt.error("hlo store", exc)
            raw = None
        return exe, raw

    def meta():
        name = _compat.module_name(computation)
        return entry_meta(backend, list(executable_devices), name)

    def load(raw: bytes):
        return backend.deserialize_executable(raw, executable_devices, compile_options)

    return rt.hlo_compile_through(key, compile_fn, load, meta)


def entry_meta(backend, da, fun_name) -> dict[str, Any]:
    d0 = da[0]
    return {
        "backend": backend.platform,
        "device_kind": d0.device_kind,
        "jax_version": _compat.JAX_VERSION,
        "jaxlib_version": _compat.JAXLIB_VERSION,
        "function_name": str(fun_name),
        "extra": {
            "platform_version": backend.platform_version,
            "device_ids": [d.id for d in da],
            "num_devices": len(da),
        },
    }
