"""The recorder pcache hands JAX in place of its trace-cache entry on a miss
(`pcache._trace`): JAX traces in a context of the recording's own, and the trace
is handed to pcache with what the program's code read from library modules while
it ran (`pcache._module_watch`)."""

from __future__ import annotations

import sys
import threading
import weakref
from typing import Any

from pcache import _compat, _guards, _module_watch


class Recorder:
    """Stands in for JAX's `InferParamsCacheEntry` on a miss: `_infer_params` reads
    ``pjit_params`` (None: it traces) and then sets it, which fills JAX's own entry
    and records the trace for equal callables.

    The read enters a trace context no other trace had (`_compat.recording_trace`)
    for the trace JAX makes next: every JAX cache keyed on a function misses in it,
    whatever its key holds, so the trace is made of the states pcache keyed and
    noted, never of one JAX cached before (eagerly, in a call pcache did not key, of
    an object that compares equal: reviews 20-22, 73), and no pcache frame is on the
    stack while JAX traces. The set leaves it, and records only if the context was
    this recording's all along (review 75: a call under `ensure_compile_time_eval`
    looks like a top-level one)."""

    __slots__ = ("_entry", "_record", "_cm", "_token", "_fresh", "_fill", "_reads", "_watch",
                 "_frame", "__weakref__")  # fmt: skip

    def __init__(
        self, entry: Any, record: Any, fresh: bool = True, fill: bool = True, watch: bool = True
    ) -> None:
        self._entry = entry
        self._record = record
        self._cm = self._token = self._reads = self._frame = None
        self._fresh = fresh  # (False: check mode's trace of a reuse, as stock makes it)
        self._fill = fill  # (False: a served trace holding stand-ins, for this dispatch)
        self._watch = watch  # (False: a stored trace served, nothing recorded)

    @property
    def pjit_params(self) -> Any:
        if self._fresh and self._cm is None and not _compat.recording():
            self._cm, self._token = _compat.recording_trace()
            self._cm.__enter__()
            _RECORDING.active = (weakref.ref(self), self._cm)
            if self._watch:  # (what the program's code reads from library modules)
                self._reads = _module_watch.start()
                self._frame = sys._getframe(1)  # (JAX's `_infer_params`, which traces)
        return None

    @pjit_params.setter
    def pjit_params(self, p: Any) -> None:
        cm, self._cm = self._cm, None
        own = cm is not None and _compat.recording_token() == self._token
        reads, self._reads, self._frame = self._reads, None, None
        spent = _module_watch.stop(reads) if reads is not None else 0.0
        if cm is not None:
            _RECORDING.active = None
            cm.__exit__(None, None, None)
        if self._fill:
            self._entry.pjit_params = p
        if own or not self._fresh:
            self._record(p, reads or [], spent)

    def abandon(self) -> None:
        """Its trace raised: no setter comes."""
        reads, self._reads, self._frame = self._reads, None, None
        if reads is not None:
            _module_watch.release(reads)

    def tracing(self) -> bool:
        """Whether the call it records still runs (its `_infer_params` frame on this
        thread's stack), not one whose trace raised, its exception kept (review 215).
        No pcache frame stands in JAX's trace to see it raise: a trace may read its
        stack (``logging``'s ``findCaller``: review 28)."""
        f = sys._getframe(1)
        while f is not None and f is not self._frame:
            f = f.f_back
        return f is not None

    def __del__(self) -> None:
        self.abandon()


# ``active``: (a weak reference to the `Recorder` whose context this thread is in, it)
_RECORDING = threading.local()


def left_behind() -> bool:
    """Whether this thread's recording context is one a recording whose trace raised
    left entered (its recorder is gone: the exception let go of it), left now. While
    the recorder lives (a trace in progress, or an exception kept), it is not."""
    active = getattr(_RECORDING, "active", None)
    if active is None:
        return False  # (a context not pcache's: left alone)
    rec = active[0]()
    if rec is not None:
        if rec._reads is None or rec.tracing():
            return False  # (a recording in progress)
        rec.abandon()  # (its trace raised, the exception kept: review 215)
    _RECORDING.active = None
    active[1].__exit__(None, None, None)
    return True


_KINDS = {"is": _guards.IS, "attr": _guards.LIBATTR, "absent": _guards.ABSENT}


def read_guards(guards: list, reads: list) -> tuple[list, str | None, str | None]:
    """The guards of what the program's code read from modules while traced
    (`pcache._module_watch`) but the key's ``guards``; or why it is not recorded; and
    the first read the program's code made itself (`_module_watch.watched`)."""
    known = {(id(g[1]), g[2]) for g in guards if g[0] in _KINDS.values()}
    got, why, direct = _module_watch.watched(reads, known)
    return [(_KINDS[k], *rest) for k, *rest in got], why, direct


__all__ = ["Recorder", "left_behind", "read_guards"]
