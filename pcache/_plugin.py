"""JAX plugin entry point: ``JAX_PCACHE_DIR`` switches pcache on with no code change.

pcache registers this module in the ``jax_plugins`` entry-point group. JAX imports
it and calls ``initialize()`` while it starts its backends, before the first
compilation. It registers no PJRT plugin; it only enables the cache.
"""

from __future__ import annotations

import logging
import os

logger = logging.getLogger("pcache")


def initialize() -> None:
    from pcache import _config

    _config.flag_env_at_backend_start()  # always: keys must name the flags XLA compiles with
    if not os.environ.get("JAX_PCACHE_DIR"):  # not switched on: pcache stays unimported
        return
    from pcache import _api

    try:
        _api.enable_from_env()
    except Exception as exc:  # never break the user's program at JAX start-up
        try:
            raise_errors = _config.read_env().get("raise_errors", False)
        except _config.ConfigError:
            raise_errors = False
        if raise_errors:
            raise
        # Logged, not warned: this runs inside the program's first JAX call, where
        # `-W error` would turn a warning into an exception.
        logger.warning("pcache: not enabled (%s: %s)", type(exc).__name__, exc)
