"""JAX plugin entry point: ``JAX_PCACHE_DIR`` switches pcache on with no code change.

pcache registers this module in the ``jax_plugins`` entry-point group. JAX imports
it and calls ``initialize()`` while it starts its backends, before the first
compilation. It registers no PJRT plugin; it only enables the cache.
"""

from __future__ import annotations

import logging
import os

logger = logging.getLogger("pcache")

# The variables XLA reads its flags from, once, when the backends start.
FLAG_VARS = ("XLA_FLAGS", "LIBTPU_INIT_ARGS")
_FLAGS_AT_START: dict[str, str | None] | None = None


def flag_env_at_backend_start() -> dict[str, str | None]:
    """XLA_FLAGS and LIBTPU_INIT_ARGS as XLA saw them.

    JAX calls ``initialize()`` while it starts its backends, just before it creates
    the clients (which is when XLA parses these variables, once per process), so the
    values taken there are exactly XLA's. Where JAX did not run the plugin (pcache
    used from a source tree without its entry point), the values at pcache's first
    key are the best that can be known.
    """
    global _FLAGS_AT_START
    if _FLAGS_AT_START is None:
        _FLAGS_AT_START = {v: os.environ.get(v) for v in FLAG_VARS}
    return _FLAGS_AT_START


def initialize() -> None:
    flag_env_at_backend_start()  # always: keys must name the flags XLA compiles with
    if not os.environ.get("JAX_PCACHE_DIR"):  # not switched on: pcache stays unimported
        return
    from pcache import _api, _config

    try:
        _api.enable_from_env()
    except Exception as exc:  # never break the user's program at JAX start-up
        try:
            raise_errors = _config.read_env().raise_errors
        except _config.ConfigError:
            raise_errors = False
        if raise_errors:
            raise
        # Logged, not warned: this runs inside the program's first JAX call, where
        # `-W error` would turn a warning into an exception.
        logger.warning("pcache: not enabled (%s: %s)", type(exc).__name__, exc)
