"""pcache: a persistent compilation cache for JAX.

Switch it on with ``pcache.enable()`` in an entrypoint, or with no code change by
setting ``JAX_PCACHE_DIR`` (JAX's plugin discovery runs ``pcache._plugin``).

Attributes are loaded on first use, so JAX's plugin discovery importing
``pcache._plugin`` costs nothing when the cache is not switched on.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "enable": "pcache._api",
    "disable": "pcache._api",
    "enabled": "pcache._api",
    "is_enabled": "pcache._api",
    "stats": "pcache._api",
    "clear_memory": "pcache._api",
    "fingerprint": "pcache._api",
    "key": "pcache._api",
    "explain": "pcache._api",
    "export_bundle": "pcache._api",
    "import_bundle": "pcache._api",
    "BundleError": "pcache._bundle",
    "CacheKey": "pcache._key",
    "ConfigError": "pcache._config",
    "PcacheError": "pcache._errors",
    "CheckError": "pcache._errors",
    "Uncacheable": "pcache._errors",
    "CorruptEntryError": "pcache._errors",
    "CacheDirError": "pcache._errors",
    "IntegrityError": "pcache._errors",
}

__all__ = sorted(_EXPORTS)

if TYPE_CHECKING:  # pragma: no cover
    from pcache._api import (  # noqa: F401
        clear_memory,
        disable,
        enable,
        enabled,
        explain,
        export_bundle,
        fingerprint,
        import_bundle,
        is_enabled,
        key,
        stats,
    )
    from pcache._bundle import BundleError  # noqa: F401
    from pcache._config import ConfigError  # noqa: F401
    from pcache._errors import (  # noqa: F401
        CacheDirError,
        CheckError,
        CorruptEntryError,
        IntegrityError,
        PcacheError,
        Uncacheable,
    )
    from pcache._key import CacheKey  # noqa: F401


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        if name.startswith("_") and not name.startswith("__"):
            try:  # private submodules (pcache._canon...) for tests and tools
                return importlib.import_module(f"pcache.{name}")
            except ModuleNotFoundError:
                pass
        raise AttributeError(f"module 'pcache' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
