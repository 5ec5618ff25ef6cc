"""pcache's in-process memos, each registered where it is defined, so one call
forgets them all and one hook makes them safe in a forked child.

Two scopes: ``clear()`` forgets what pcache memoized (`pcache.clear_memory`, a jit's
``clear_cache()``, a new runtime); ``clear(jax_caches=True)`` also forgets what
pcache knew of JAX's own caches (`jax.clear_caches()`: JAX holds no trace of any
function any more). Memos that must outlive both (warn-once sets, initializers
already run, the originals of the functions pcache wraps) are not registered.
"""

from __future__ import annotations

import contextlib
import gc
import os
import weakref
from collections.abc import Callable
from typing import Any


@contextlib.contextmanager
def collector_paused():
    """Python's cyclic collector paused (if it runs) while pcache builds a memo or
    walks: what it makes is freed by its counts when done, or kept, and collections
    meanwhile would traverse the growing structure again and again (a young one
    every 700 objects) and promote the temporaries toward the full collections
    that cost 30-60 ms in a process with JAX loaded. Nothing made inside makes a
    cycle that must be collected before it ends."""
    was_on = gc.isenabled()
    if was_on:
        gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


_CLEARS: list[tuple[str, Callable[[], Any], bool]] = []  # (name, clear, only with JAX's)
_AFTER_FORK: list[Callable[[], Any]] = []
_OBJECTS: list[tuple[str, Any]] = []  # (name, memo) registered by `memo` (tests)


def memo(name: str, obj: Any, *, with_jax_caches: bool = False) -> Any:
    """Register ``obj`` (anything with ``clear()``) under ``name``; returns it, so a
    memo is registered where it is made: ``_X = memo("x", {})``."""
    register(name, obj.clear, with_jax_caches=with_jax_caches)
    _OBJECTS.append((name, obj))
    return obj


def register(name: str, clear: Callable[[], Any], *, with_jax_caches: bool = False) -> None:
    """``clear`` runs on every `clear` (``with_jax_caches``: only on
    ``clear(jax_caches=True)``)."""
    _CLEARS.append((name, clear, with_jax_caches))


def after_fork(fn: Callable[[], Any]) -> Callable[[], Any]:
    """Run ``fn`` in a forked child (a lock another thread held at the fork would
    never be released there); usable as a decorator."""
    _AFTER_FORK.append(fn)
    return fn


_FORKED: weakref.WeakSet = weakref.WeakSet()  # objects with an ``_after_fork()``


def reset_after_fork(obj: Any) -> None:
    """Call ``obj._after_fork()`` in a forked child while ``obj`` lives (a runtime's,
    a remote tier's locks); held weakly, so a closed object is not kept alive."""
    _FORKED.add(obj)


def clear(*, jax_caches: bool = False) -> None:
    for _name, fn, with_jax in _CLEARS:
        if jax_caches or not with_jax:
            fn()


def registered() -> list[tuple[str, Any]]:
    """The memos registered by `memo`, by name."""
    return list(_OBJECTS)


def _in_child() -> None:
    for fn in _AFTER_FORK:
        fn()
    for obj in list(_FORKED):
        obj._after_fork()


os.register_at_fork(after_in_child=_in_child)
