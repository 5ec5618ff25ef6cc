"""A program the fault tests run in real subprocesses (python tests/fault_prog.py).

It never imports pcache: ``JAX_PCACHE_DIR`` alone switches the cache on, as for a
user who changed no code. Runs ``PROGRAMS`` (argv[1], default 3) jitted functions
re-created per call, and prints one JSON line: the results' sha256, backend
compiles and lowerings, pcache's WARNING records and Python warnings, pcache's stats (when it
was enabled) and the peak RSS (VmHWM, KiB).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sys
import warnings

RECORDS: list[str] = []


class _Keep(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno >= logging.WARNING:
            RECORDS.append(record.getMessage())


logging.getLogger("pcache").addHandler(_Keep())
warnings.simplefilter("always")
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import jax
    import jax.numpy as jnp
    import numpy as np

    compiles = lowerings = 0

    def _listener(name, secs, **kw):
        global compiles, lowerings
        if name == "/jax/core/compile/backend_compile_duration":
            compiles += 1
        elif name == "/jax/core/compile/jaxpr_to_mlir_module_duration":
            lowerings += 1

    jax.monitoring.register_event_duration_secs_listener(_listener)
    # Start the backends (and with them pcache) first, unless FAULT_PROG_FIRST_JIT=1:
    # then the first JAX call is a jit on numpy arrays, and pcache switches on inside
    # that jit's lowering.
    if not os.environ.get("FAULT_PROG_FIRST_JIT"):
        jax.devices()
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    x = np.arange(64, dtype=np.float32).reshape(8, 8) / 64
    outs = []
    for i in range(n):
        k = float(i + 1)
        outs.append(np.asarray(jax.jit(lambda v, k=k: jnp.tanh(v @ v.T) * k + jnp.sin(v))(x)))
    h = hashlib.sha256(b"".join(o.tobytes() for o in outs)).hexdigest()

stats = {}
if "pcache._api" in sys.modules:
    stats = sys.modules["pcache._api"].stats()
hwm = 0
with open("/proc/self/status") as f:
    for line in f:
        if line.startswith("VmHWM:"):
            hwm = int(line.split()[1])
print(
    json.dumps(
        {
            "digest": h,
            "compiles": compiles,
            "lowerings": lowerings,
            "records": RECORDS,
            "warnings": [f"{w.category.__name__}: {w.message}" for w in caught],
            "stats": stats,
            "vmhwm_kib": hwm,
        },
        default=str,
    ),
    flush=True,
)
