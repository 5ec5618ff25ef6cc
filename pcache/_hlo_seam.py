"""The HLO-level seam: JAX's own persistent-cache interface, served from pcache's store.

Every compile the jit seam does not key (pmap, a jit seam bypass, compiles on a JAX
line outside `_compat.SUPPORTED`) reaches `compiler.compile_or_get_cached` with a
lowered module: keyed as JAX's own persistent cache keys it
(`compilation_cache.get_cache_key`), stored in the same store (``hlo-<key>``).
Lowering is not skipped here; only the XLA compile is.

Programs with host callbacks are served too (JAX's own cache refuses them): the
module calls each callback by its index in the list JAX passes with it, never by
a pointer, so the executable compiled for one module is deserialized bound to
this compile's own callbacks, as the jit seam binds a hit (`_load.bind`). The key
is JAX's key of that module with the number of callbacks folded in; a module that
names a callback any other way (a pointer) has a key of its own in each process
and is only ever a miss.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
from typing import Any

from pcache import _compat, _load, _state
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


def compile_or_get_cached_wrapper(*args, **kwargs):
    """`compiler.compile_or_get_cached` served from pcache's store.

    Passes through when JAX's own persistent cache is configured (the user chose it
    for these compiles) and for profile-guided compiles. JAX's configuration and
    its cache object are left as they are. Host callbacks: see the module doc.
    """
    c = _compat.CompileOrGetCachedCall.of(args, kwargs)
    backend, computation, devices, compile_options = c[:4]
    host_callbacks, executable_devices = c.host_callbacks, c.executable_devices
    pgle_profiler = c.pgle_profiler

    def call():
        return _state.ORIG["compile_or_get_cached"](*args, **kwargs)

    rt = _state.rt
    if rt is None or _HLO_OFF.get() or pgle_profiler is not None or _compat.jax_cache_configured():
        return call()
    try:
        stateful = _compat.stateful_op(computation)
    except Exception as exc:
        rt.error("hlo stateful ops", exc)
        return call()
    if stateful is not None:  # its own generator, seeded per compile: never shared
        rt.bypass(f"stateful:{stateful}", _compat.module_name(computation))
        return call()
    callbacks = list(host_callbacks or ())
    if callbacks:
        try:
            by_index = _callbacks_by_index(computation)
        except Exception as exc:
            rt.error("hlo callbacks", exc)
            by_index = False
        if not by_index:
            return call()

    def load(raw: bytes):
        if callbacks:
            return backend.deserialize_executable(
                raw, executable_devices, compile_options, host_callbacks=callbacks
            )
        return backend.deserialize_executable(raw, executable_devices, compile_options)

    try:
        key = _compat.hlo_cache_key(computation, devices, compile_options, backend)
        if callbacks:
            key = _with_callbacks(key, len(callbacks))
        cls = _load.host_class(backend, executable_devices)
        exe = rt.hlo_get(key, load, cls)
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

    return rt.hlo_compile_through(key, compile_fn, load, meta, cls)


# The custom calls by which JAX's CPU and GPU lowerings call a host callback: by
# its index in the compile's host-callback list (`callback.emit_python_callback`).
_BY_INDEX = frozenset(
    f"xla_ffi{part}_python_{dev}_callback"
    for part in ("", "_partitioned")
    for dev in ("cpu", "gpu")
)


def _callbacks_by_index(computation) -> bool:
    """Whether every host callback the module calls is called by index: at least
    one such custom call and no other callback-like one (a pointer in the legacy
    custom calls, send/recv channels on TPU: never served across processes)."""
    targets = _compat.custom_call_targets(computation)
    callbacks = [t for t in targets if "callback" in t]
    return bool(callbacks) and all(t in _BY_INDEX for t in callbacks)


def _with_callbacks(key: str, count: int) -> str:
    """JAX's key ``<module name>-<hex>`` of a module calling ``count`` host
    callbacks: the hex part rehashed with the count (the format kept)."""
    name, _, h = key.rpartition("-")
    return f"{name}-" + hashlib.sha256(f"{h}\nhost-callbacks:{count}".encode()).hexdigest()


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
