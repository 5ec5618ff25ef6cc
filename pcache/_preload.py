"""Preloading: a new process loads what its previous run used, off the main thread.

`WorkingSets` records the persistent keys a process uses, per program x backend x
JAX version, and saves them as store key sets; the next run's `Preloader` loads
those entries on a daemon thread, so deserialization overlaps tracing. No JAX
here: the runtime hands both a `PreloadHost` (the store, how to check an entry,
where to count and report), and `pcache._load` the functions that decide whether
an entry is usable here and deserialize it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import threading
from collections.abc import Callable
from typing import Any

logger = logging.getLogger("pcache")

#: ``load(raw, params, replay) -> (executable, signature)``: deserialize an entry
#: with the load parameters and replay record stored beside it (both signed);
#: ``signature`` says how it was loaded.
PreloadFn = Callable[[bytes, Any, Any], "tuple[Any, Any] | None"]


@dataclasses.dataclass(frozen=True)
class PreloadHost:
    """What preloading needs of the runtime, and nothing more.

    ``store``: read with ``entry``/``get_entry``/``key_set``, written with
    ``put_key_set``, each thread's connection released with ``release_connection``.
    ``load_params(digest, entry)``: the entry's load parameters if its signed head
    is this cache's, else None. ``body_ok(digest, raw, extra)``: whether the bytes
    pass their HMAC. ``entry_overhead``: what the memory tier counts per entry
    beyond its bytes. ``on_preloaded()``: count one. ``background_error(cause,
    exc)``: count and log a failure on a helper thread.
    """

    store: Any
    load_params: Callable[[str, Any], Any]
    body_ok: Callable[[str, bytes, dict], bool]
    entry_overhead: int
    on_preloaded: Callable[[], None]
    background_error: Callable[[str, BaseException], None]


class WorkingSets:
    """The persistent keys this process used, per working set (program x backend x
    JAX version), in first-use order.

    Each is saved as the store's key set of that name a few seconds after it last
    grew, and at exit, for the next run's `Preloader`: this run's keys first, then
    the previous run's that this one did not use (so a short run, e.g. one that
    exits after its first step, does not wipe what a full run will want).
    """

    SAVE_DELAY = 2.0  # seconds: coalesces the burst of first uses at start-up
    MAX_KEYS = 4096

    def __init__(self, host: PreloadHost, *, enabled: bool = True) -> None:
        self._host = host
        self._enabled = enabled
        self._sets: dict[str, dict[str, None]] = {}
        self._previous: dict[str, list[str]] = {}
        self._dirty: set[str] = set()
        self._timer: threading.Timer | None = None
        self._lock = threading.Lock()
        self._save_lock = threading.Lock()  # one save at a time: the newest snapshot lands last

    def add(self, name: str, digest: str) -> None:
        keys = self._sets.get(name)
        if keys is not None and digest in keys:  # the steady state: two dict lookups
            return
        if not self._enabled:
            return
        with self._lock:
            keys = self._sets.setdefault(name, {})
            if digest in keys or len(keys) >= self.MAX_KEYS:
                return
            keys[digest] = None
            self._dirty.add(name)
            if self._timer is not None:
                return
            timer = self._timer = threading.Timer(self.SAVE_DELAY, self._timed_save)
            timer.daemon = True
        try:
            timer.start()
        except RuntimeError as exc:  # can't start new thread: saved at exit instead
            with self._lock:
                self._timer = None
            self._host.background_error("working-set timer", exc)

    def set_previous(self, name: str, keys: list[str]) -> None:
        with self._lock:
            self._previous[name] = list(keys)

    def _timed_save(self) -> None:
        try:
            self.save()
        finally:
            # This thread ends now; its SQLite connection must not outlive it.
            self._host.store.release_connection()

    def save(self) -> None:
        with self._save_lock:
            with self._lock:
                if self._timer is not None:
                    self._timer.cancel()
                    self._timer = None
                if not self._enabled:
                    return
                snapshot = {}
                for name in self._dirty:
                    keys = list(self._sets[name])
                    seen = set(keys)
                    keys += [k for k in self._previous.get(name, ()) if k not in seen]
                    snapshot[name] = keys[: self.MAX_KEYS]
                self._dirty.clear()
            for name, keys in snapshot.items():
                try:
                    self._host.store.put_key_set(name, keys)
                except Exception as exc:  # a hint for the next run: never worth an exception
                    self._host.background_error("store write (working set)", exc)


_PENDING, _LOADING, _DONE, _TAKEN = range(4)


class _Item:
    __slots__ = ("done", "result", "state")

    def __init__(self) -> None:
        self.state = _PENDING
        self.done = threading.Event()
        self.result: tuple | None = None


class Preloader:
    """Loads the previous run's working set on a daemon thread, ahead of the
    lookups that will want it.

    Reading, checking and deserializing an entry all release the GIL, so on a new
    process this overlaps the main thread's tracing. Entries load largest first
    (within ``budget`` bytes): a lookup takes a loaded executable, waits for one
    being loaded, or (if the thread has not reached it) claims it and loads it
    itself, which is cheap for the small ones. Entries are read without touching
    the store's hit counts (`touch` happens on use); what nobody has asked for
    ``RELEASE_AFTER`` seconds after the thread finished is dropped.
    """

    WAIT_LIMIT = 60.0  # seconds a lookup waits for an entry the thread is loading
    RELEASE_AFTER = 60.0

    def __init__(
        self,
        host: PreloadHost,
        digests: list[str],
        usable: Callable[[Any], bool],
        load: PreloadFn,
        budget: int,
    ) -> None:
        self._host = host
        self._order = digests
        self._usable = usable
        self._load = load
        self._release_timer: threading.Timer | None = None
        self._budget = budget
        self._lock = threading.Lock()
        self._items = {d: _Item() for d in digests}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="pcache-preload", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, *, wait: bool = True, timeout: float | None = None) -> None:
        """Stop after the load in flight; with ``wait``, join the thread (``timeout``
        None: however long that load takes)."""
        self._stop.set()
        timer = self._release_timer
        if timer is not None:
            timer.cancel()
        if wait and self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=timeout)

    def release(self) -> None:
        dropped = []
        with self._lock:
            for item in self._items.values():
                if item.state == _DONE:
                    dropped.append(item.result)
                    item.result, item.state = None, _TAKEN
        del dropped  # executables are freed here, outside the lock

    def take(self, digest: str) -> tuple | None:
        """``(executable, signature, entry, nbytes)`` if preloaded, else None."""
        item = self._items.get(digest)
        if item is None:
            return None
        with self._lock:
            state = item.state
            if state in (_PENDING, _TAKEN):
                item.state = _TAKEN
                return None
        if state == _LOADING and not item.done.wait(self.WAIT_LIMIT):
            # Never hang a lookup on the helper thread: load it the normal way.
            logger.warning(
                "pcache: preloading %s took over %.0f s; loading it here instead",
                digest[:12],
                self.WAIT_LIMIT,
            )
            with self._lock:
                if item.state == _LOADING:
                    item.state = _TAKEN
                    return None
        with self._lock:
            got, item.result = item.result, None
            item.state = _TAKEN
        return got

    def _run(self) -> None:
        try:
            for digest in self._schedule():
                if self._stop.is_set():
                    break
                item = self._items[digest]
                with self._lock:
                    if item.state != _PENDING:
                        continue
                    item.state = _LOADING
                result = None
                try:
                    result = self._load_one(digest)
                except Exception as exc:  # the lookup will load (and report) it itself
                    logger.debug("pcache: preloading %s failed: %r", digest[:12], exc)
                finally:
                    with self._lock:
                        if item.state == _LOADING:
                            item.result, item.state = result, _DONE
                        else:  # a lookup gave up waiting and loaded it itself
                            result = None
                    item.done.set()
                if result is not None:
                    self._host.on_preloaded()
        finally:
            self._host.store.release_connection()
        if not self._stop.is_set():
            timer = self._release_timer = threading.Timer(self.RELEASE_AFTER, self.release)
            timer.daemon = True
            with contextlib.suppress(RuntimeError):
                timer.start()

    def _schedule(self) -> list[str]:
        """The entries to load, largest first, as many as fit in the budget (each
        counts its size plus the memory tier's per-entry overhead)."""
        sizes = {}
        for digest in self._order:
            if self._stop.is_set():
                return []
            try:
                e = self._host.store.entry(digest)
            except Exception as exc:
                logger.debug("pcache: preload could not list %s: %r", digest[:12], exc)
                e = None
            # Metadata only: skip, before reading any value, what was written for
            # another backend or environment (it would only use up the budget).
            if e is not None and self._params(digest, e) is not None:
                sizes[digest] = e.raw_size
        chosen, used = [], 0
        for digest in sorted(sizes, key=lambda d: -sizes[d]):
            cost = sizes[digest] + self._host.entry_overhead
            if used + cost <= self._budget:
                chosen.append(digest)
                used += cost
        return chosen

    def _params(self, digest: str, entry: Any) -> Any | None:
        """The entry's load parameters if its signed head is pcache's own and they
        are ``usable`` here; else None."""
        params = self._host.load_params(digest, entry)
        if params is None:
            return None
        return params if self._usable(params) else None

    def _load_one(self, digest: str) -> tuple | None:
        host = self._host

        def admit(entry: Any) -> None:  # nothing is read of an entry we would not use
            if self._params(digest, entry) is None:
                raise _Skip

        try:
            got = host.store.get_entry(digest, touch=False, admit=admit)
        except _Skip:
            return None
        if got is None:
            return None
        raw, entry = got
        params = self._params(digest, entry)
        if params is None or self._stop.is_set():
            return None
        if not host.body_ok(digest, raw, entry.extra):
            return None  # a lookup reads it the checked way (and reports it)
        if self._stop.is_set():
            return None
        loaded = self._load(raw, params, entry.extra.get("replay"))
        if loaded is None:  # written for another backend, device kind or JAX
            return None
        exe, signature = loaded
        return exe, signature, entry, len(raw)


class _Skip(Exception):
    """An entry the preloader does not want (checked before reading its value)."""
