"""Lowering's side effects, recorded on a miss and replayed on every hit.

Lowering does more than produce a module, and a hit that skips lowering must still
do the rest, from what the entry records (never by a special case for one kernel):

* custom-call kernels that a lowering rule initializes on first use (jaxlib's
  LAPACK rules call `prepare_lapack_call`, which loads the LAPACK function
  pointers; GPU hybrid eig/qr kernels likewise): the entry records the custom-call
  targets its module calls, and loading it runs the initializer of each target's
  kernel library (`_compat.kernel_initializers`) before the executable is
  deserialized;
* warnings lowering emits (unusable donated buffers, large captured constants,
  a user lowering rule's own): recorded on the miss with their category, text and
  location, re-issued on every hit through `warnings.warn_explicit` with the
  registry of the module that issued them, so the user's filters (`-W error`,
  `ignore`, "once per location") decide exactly as they would have;
* the `jax_log_compiles` "Compiling ..." record, logged again on each hit;
* host callbacks (`jax.pure_callback`, `io_callback`, `jax.debug.print`/`callback`,
  equinox's runtime checks): how many the lowering registered. Such a program is
  never a hit without lowering (its key is completed by the lowered module, see
  `_key.with_module`, and its callbacks are this call's Python functions, which
  only lowering registers), so nothing of its lowering is replayed: the stored
  executable is deserialized bound to the new callbacks (`_load.bind`).

Monitoring events are not replayed: JAX's lowering and backend-compile events
mean work that a hit does not do (pcache records its own `/pcache/*` events).
"""

from __future__ import annotations

import contextvars
import logging
import sys
import warnings
from typing import Any, NamedTuple

from pcache import _compat

_KERNEL_INITIALIZERS: tuple | None = None
_INITIALIZED: set = set()  # initializers already run in this process (never undone)


def _initialize_targets(targets) -> None:
    global _KERNEL_INITIALIZERS
    if _KERNEL_INITIALIZERS is None:
        _KERNEL_INITIALIZERS = _compat.kernel_initializers()
    for target in targets:
        for prefix, init in _KERNEL_INITIALIZERS:
            if target.startswith(prefix) and init not in _INITIALIZED:
                init()
                _INITIALIZED.add(init)


class WarningRecord(NamedTuple):
    """A warning lowering issued: enough to issue it again as `warnings.warn` did."""

    category: str  # "module:QualName"
    message: str
    filename: str
    lineno: int
    module: str


class Replay(NamedTuple):
    """What a lowering did besides producing its module (see the section comment)."""

    custom_calls: tuple[str, ...] = ()
    warnings: tuple[WarningRecord, ...] = ()
    host_callbacks: int = 0  # how many the lowering registered (bound again on a hit)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "custom_calls": list(self.custom_calls),
            "warnings": [list(w) for w in self.warnings],
        }
        if self.host_callbacks:
            out["host_callbacks"] = self.host_callbacks
        return out

    @classmethod
    def from_json(cls, obj) -> Replay:
        """Validated: a malformed record raises (the entry is then not used)."""
        if obj is None:
            return NO_REPLAY
        calls, warns = obj["custom_calls"], obj["warnings"]
        if not (isinstance(calls, list) and all(isinstance(c, str) for c in calls)):
            raise ValueError("replay: custom_calls is not a list of names")
        records = []
        for w in warns:
            rec = WarningRecord(*w)
            if (
                not all(
                    isinstance(v, str)
                    for v in (rec.category, rec.message, rec.filename, rec.module)
                )
                or type(rec.lineno) is not int
            ):
                raise ValueError("replay: malformed warning record")
            records.append(rec)
        n = obj.get("host_callbacks", 0)
        if type(n) is not int or n < 0:
            raise ValueError("replay: malformed host-callback record")
        return cls(tuple(calls), tuple(records), n)

    def initialize_kernels(self) -> None:
        if self.custom_calls:
            _initialize_targets(self.custom_calls)

    def on_hit(self, log_args) -> None:
        """What a lowering would have done, done on a hit instead of lowering."""
        if log_args is not None and _compat.pxla_logger.isEnabledFor(
            logging.WARNING if _compat.log_compiles() else logging.DEBUG
        ):
            log_compiling(*log_args)
        for w in self.warnings:
            _reissue(w)


NO_REPLAY = Replay()


def log_compiling(module_name, in_avals, in_shardings) -> None:
    # The record `_cached_lowering_to_hlo` writes (same logger, level and text).
    priority = logging.WARNING if _compat.log_compiles() else logging.DEBUG
    _compat.pxla_logger.log(
        priority,
        "Compiling %s with global shapes and types %s. Argument mapping: %s.",
        module_name,
        in_avals,
        in_shardings,
    )


def _warning_category(name: str) -> type[Warning]:
    """The class a record names, if it is loaded already (nothing is imported for a
    record: it came from the store); UserWarning otherwise."""
    mod, _, qual = name.partition(":")
    obj: Any = sys.modules.get(mod)
    for part in qual.split("."):
        obj = getattr(obj, part, None)
    return obj if isinstance(obj, type) and issubclass(obj, Warning) else UserWarning


def _reissue(w: WarningRecord) -> None:
    record = _WARN_RECORD.get()
    if record is not None:  # (issued again inside a recorded call: it issued it too)
        record.append(w)
    mod = sys.modules.get(w.module)
    registry = mod.__dict__.setdefault("__warningregistry__", {}) if mod is not None else None
    warnings.warn_explicit(
        w.message, _warning_category(w.category), w.filename, w.lineno, w.module, registry
    )


# Warnings issued while this context records (a list), for `_recording_warn`.
_WARN_RECORD: contextvars.ContextVar[list | None] = contextvars.ContextVar(
    "pcache_warn_record", default=None
)
_ORIG_WARN = warnings.warn


#: How many warnings were issued through `warnings.warn` in this process (trace
#: reuse does not record a trace during which one was: a reuse would not issue it).
WARNINGS = [0]


def _recording_warn(message, category=None, stacklevel=1, source=None, **kwargs):
    """`warnings.warn`, which also notes the warning while a lowering is recorded.

    Installed once for the process (thread-safe, unlike `catch_warnings`); outside a
    recorded lowering it only forwards. The filters still decide what happens.
    """
    WARNINGS[0] += 1
    record = _WARN_RECORD.get()
    if record is not None:
        try:
            if isinstance(message, Warning):
                category, text = type(message), str(message)
            else:
                category, text = category or UserWarning, str(message)
            frame = sys._getframe(max(1, stacklevel))
            record.append(
                WarningRecord(
                    f"{category.__module__}:{category.__qualname__}",
                    text,
                    frame.f_code.co_filename,
                    frame.f_lineno,
                    frame.f_globals.get("__name__", "<string>"),
                )
            )
        except Exception:  # a frame deeper than the stack: not recorded, still issued
            pass
    return _ORIG_WARN(message, category, stacklevel + 1, source, **kwargs)


_ORIG_SHOW = warnings._showwarnmsg


def _counting_show(msg) -> None:
    """`warnings._showwarnmsg`, counted: every warning shown, from Python
    (``from warnings import warn`` included) or from C (numpy's), passes here."""
    WARNINGS[0] += 1
    return _ORIG_SHOW(msg)


def install_warning_hook() -> None:
    if warnings.warn is not _recording_warn:
        warnings.warn = _recording_warn
    if warnings._showwarnmsg is not _counting_show:
        warnings._showwarnmsg = _counting_show


def recorded_lowering(lower, args, kwargs):
    """Lower, and return ``(lowering result, its Replay)``."""
    record: list = []
    token = _WARN_RECORD.set(record)
    try:
        out = lower(*args, **kwargs)
    finally:
        _WARN_RECORD.reset(token)
        _pass_up(record)
    try:
        module = out[0]
        return out, Replay(_compat.custom_call_targets(module), tuple(record), len(out[2]))
    except Exception as exc:
        raise LoweringFailed(out) from exc


def recorded_call(call) -> tuple[Any, tuple[WarningRecord, ...]]:
    """``call()``, and the warnings it issued."""
    record: list = []
    token = _WARN_RECORD.set(record)
    try:
        out = call()
    finally:
        _WARN_RECORD.reset(token)
        _pass_up(record)
    return out, tuple(record)


def _pass_up(record: list) -> None:
    """An enclosing recording sees what a nested one recorded."""
    outer = _WARN_RECORD.get()
    if outer is not None:
        outer.extend(record)


class LoweringFailed(Exception):
    """The lowering's record could not be read; ``out`` is the lowering's result."""

    def __init__(self, out) -> None:
        self.out = out
