"""Host-callback programs the callback tests run in real subprocesses.

    python tests/callback_prog.py FACTOR [VARIANT]

It never imports pcache (``JAX_PCACHE_DIR`` switches it on). Each program is a
re-created `jax.jit` (or `equinox.filter_jit`) around host callbacks whose
behaviour depends on FACTOR (a closure value: results, records, error messages)
and on VARIANT (``code``: another function body), never the traced computation, so
a test can change the callbacks alone and see which ones ran. Prints what the
debug callbacks printed, then one JSON line: each program's result (hex bytes) or
raised error (its type and the lines naming the message), the callbacks' own
record, backend compiles and lowerings.
"""

from __future__ import annotations

import json
import sys

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import io_callback

counts = {"compiles": 0, "lowerings": 0}


def _listener(name, secs, **kw):
    if name == "/jax/core/compile/backend_compile_duration":
        counts["compiles"] += 1
    elif name == "/jax/core/compile/jaxpr_to_mlir_module_duration":
        counts["lowerings"] += 1


jax.monitoring.register_event_duration_secs_listener(_listener)

FACTOR = float(sys.argv[1])
VARIANT = sys.argv[2] if len(sys.argv) > 2 else ""
SEEN: list[str] = []


def make_host(k):
    if VARIANT == "code":

        def host(v):
            return (np.asarray(v) + k).astype(np.float32)

    else:

        def host(v):
            return (np.asarray(v) * k).astype(np.float32)

    return host


def pure(x):
    host = make_host(FACTOR)
    return jax.jit(lambda v: jax.pure_callback(host, jax.ShapeDtypeStruct(v.shape, v.dtype), v))(x)


def ordered_io(x):
    def log(v):
        SEEN.append(f"io {float(np.asarray(v).sum()) * FACTOR}")
        return np.asarray(v)

    def f(v):
        y = io_callback(log, jax.ShapeDtypeStruct(v.shape, v.dtype), v, ordered=True)
        return jnp.sin(y) * 2

    out = jax.jit(f)(x)
    jax.effects_barrier()
    return out


def printing(x):
    def f(v):
        jax.debug.print("debug.print v0={a}", a=v[0])
        jax.debug.callback(lambda w: SEEN.append(f"debug.callback {float(w.sum()) * FACTOR}"), v)
        return v * 3

    out = jax.jit(f)(x)
    jax.effects_barrier()
    return out


def raising(x):
    def host(v):
        raise ValueError(f"host refused factor {FACTOR}")

    return jax.jit(lambda v: jax.pure_callback(host, jax.ShapeDtypeStruct(v.shape, v.dtype), v))(x)


def eqx_checked(x, limit):
    import equinox as eqx

    def f(v):
        return eqx.error_if(v * 2, jnp.any(v * 2 > limit), f"over the limit (factor {FACTOR})")

    return jax.jit(f)(x)


def eqx_filter_jit(x):
    import equinox as eqx

    # filter_jit puts a random id (os.urandom) in each error check's closure.
    @eqx.filter_jit
    def g(v):
        return eqx.error_if(jnp.cos(v), jnp.any(v > 1.0), f"too large (factor {FACTOR})")

    return g(x)


PROGRAMS = {
    "pure": pure,
    "ordered_io": ordered_io,
    "printing": printing,
    "raising": raising,
    "eqx_ok": lambda x: eqx_checked(x, 1e6),
    "eqx_raises": lambda x: eqx_checked(x, 1.0),
    "eqx_filter_jit": eqx_filter_jit,
}

x = np.arange(8, dtype=np.float32) / 4
results = {}
for name, prog in PROGRAMS.items():
    for _ in range(2):  # the second call of a re-created wrapper: an in-process hit
        try:
            results[name] = np.asarray(prog(x)).tobytes().hex()
        except Exception as exc:  # noqa: BLE001 - the error is what is compared
            said = [ln.strip() for ln in str(exc).splitlines() if "factor" in ln]
            results[name] = f"{type(exc).__name__}: {' / '.join(said)}"
pcache_stats = {}
if "pcache._api" in sys.modules:
    pcache_stats = sys.modules["pcache._api"].stats()
print(
    json.dumps({"results": results, "seen": SEEN, **counts, "stats": pcache_stats}, default=str),
    flush=True,
)
