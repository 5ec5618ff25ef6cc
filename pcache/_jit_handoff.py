"""What a jit lowering hands the compile of its module (`pcache._jit_seam` to
`pcache._jit_compile`): a hit's `Prefetched` placeholder module, which carries the
ready executable, or, for a miss's real module, its `Pending` key."""

from __future__ import annotations

import dataclasses
import threading
import weakref

from pcache import _load, _replay, _state
from pcache._key import CacheKey, Predicted


class Prefetched:
    """Stands in for the StableHLO module when the executable came from the cache.

    Holds what is needed to lower for real if anything asks for the module.
    """

    def __init__(self, loaded: _load.Loaded, key, predicted: Predicted, call, lower_args):
        self.loaded = loaded
        self.executable = loaded.executable
        self.host_callbacks = loaded.host_callbacks
        self.keepalive = loaded.keepalive
        self.key = key
        self.predicted = predicted
        self._lower = lower_args
        # module name, in_avals, in_shardings: what the `jax_log_compiles` record names
        self.log_args = (call.module_name, call.in_avals, call.sem_in.shardings)
        # A callback program must never be re-lowered behind the executable's back:
        # re-lowering registers new callbacks. Reuse the module it was compiled from.
        self._module = loaded.module

    def materialize(self):
        if self._module is None:
            args, kwargs = self._lower
            self._module = _state.ORIG["lower"](*args, **kwargs)[0]
        return self._module


@dataclasses.dataclass(frozen=True)
class Pending:
    """What a miss's lowering hands the compile of its module."""

    key: CacheKey
    predicted: Predicted  # the compile inputs the key assumed
    fun_name: str
    keepalive: tuple
    host_callbacks: tuple
    replay: _replay.Replay


# Real modules lowered on a miss -> their Pending.
# Keyed by the module object's identity (weakly: the entry dies with the module);
# a module is immutable once lowered, and an entry is popped by its one compile.
_PENDING: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_PENDING_LOCK = threading.Lock()


def hand_over(module, pending: Pending) -> None:
    """``module``'s compile is to store it under ``pending``."""
    with _PENDING_LOCK:
        _PENDING[module] = pending


def take(module) -> Pending | None:
    """What ``module``'s lowering handed over, once."""
    with _PENDING_LOCK:
        return _PENDING.pop(module, None)


def same_objects(a, b) -> bool:
    """Same callbacks, by identity (they are process-local objects)."""
    a, b = tuple(a or ()), tuple(b or ())
    return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))
