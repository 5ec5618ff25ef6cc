"""pcache: a persistent compilation cache for JAX.

Switch it on with ``pcache.enable()`` in an entrypoint, or with no code change by
setting ``JAX_PCACHE_DIR`` (JAX's plugin discovery runs ``pcache._plugin``).
"""

from __future__ import annotations

from pcache._api import (
    clear_memory,
    disable,
    enable,
    enabled,
    explain,
    fingerprint,
    is_enabled,
    key,
    stats,
)
from pcache._config import ConfigError
from pcache._errors import PcacheError, Uncacheable
from pcache._key import CacheKey

__all__ = [
    "CacheKey",
    "ConfigError",
    "PcacheError",
    "Uncacheable",
    "clear_memory",
    "disable",
    "enable",
    "enabled",
    "explain",
    "fingerprint",
    "is_enabled",
    "key",
    "stats",
]
