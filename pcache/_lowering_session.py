"""The lowering session: what pcache's jit wrappers know of one JAX lowering.

`lower_sharding_computation` knows what `_cached_lowering_to_hlo` is not told (the
jaxpr as given, `keep_unused`, compiler options, the device assignment): pcache's
wrappers of the two and of `_get_and_check_device_assignment` pass it on in a
`LowerCtx`, the one mutable record here. With it, the session carries whether the
call is `pcache.fingerprint`'s probe (raise the key, never lower) and the jaxpr
digest `_pjit_lower`'s wrapper already took. All of it lives in one context
variable, set and read only through the functions below.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from typing import Any, NamedTuple

from pcache import _canon, _compat, _key
from pcache._key import CacheKey, Predicted


class LowerCtx:
    """What `lower_sharding_computation` knows that `_cached_lowering_to_hlo` is not
    told: made by `lowering`, completed by `note_device_assignment`; it lives for one
    lowering."""

    __slots__ = (
        "jaxpr",
        "jaxpr_digest",
        "keep_unused",
        "compiler_options_kvs",
        "lowering_platforms",
        "pgle_profiler",
        "fun_name",
        "device_list",
        "backend",
        "probe",
    )

    def __init__(
        self,
        jaxpr,
        keep_unused,
        fun_name,
        compiler_options_kvs,
        lowering_platforms,
        pgle_profiler,
        probe,
    ):
        self.jaxpr = jaxpr
        self.jaxpr_digest = None
        self.keep_unused = keep_unused
        self.fun_name = fun_name
        self.compiler_options_kvs = compiler_options_kvs
        self.lowering_platforms = lowering_platforms
        self.pgle_profiler = pgle_profiler
        self.device_list = None
        self.backend = None
        self.probe = probe

    def digest(self) -> _canon.JaxprDigest:
        """The digest of the jaxpr `lower_sharding_computation` was given (before
        JAX's DCE and ref discharge, which are deterministic functions of it and of
        the keyed `keep_unused`). Computed once per lowering: `pjit_lower_wrapper`
        hands over the digest it already took for its own memo."""
        if self.jaxpr_digest is None:
            self.jaxpr_digest = _canon.jaxpr_fingerprint(self.jaxpr)
        return self.jaxpr_digest

    def key(self, call: _compat.LoweringCall) -> tuple[CacheKey, Predicted]:
        return _key.lowering_key(
            call,
            jaxpr_digest=self.digest,
            keep_unused=self.keep_unused,
            device_list=self.device_list,
            compiler_options_kvs=self.compiler_options_kvs,
            pgle_profiler=self.pgle_profiler,
        )

    def unmemoized(self) -> LowerCtx:
        """The same lowering's record, without its digest (``JAX_PCACHE_CHECK``)."""
        again = LowerCtx(
            self.jaxpr, self.keep_unused, self.fun_name, self.compiler_options_kvs,
            self.lowering_platforms, self.pgle_profiler, False,
        )  # fmt: skip
        again.device_list, again.backend = self.device_list, self.backend
        return again


class _Session(NamedTuple):
    probe: bool = False  # `pcache.fingerprint`: raise the key from inside lowering
    handed: tuple | None = None  # (jaxpr, its JaxprDigest) from `pjit_lower_wrapper`
    lowering: LowerCtx | None = None  # the `lower_sharding_computation` running


_NONE = _Session()
_SESSION: contextvars.ContextVar[_Session] = contextvars.ContextVar(
    "pcache_lowering_session",
    default=_NONE,  # noqa: B039 - an immutable tuple: every change sets a new one
)


@contextlib.contextmanager
def _with(**changes) -> Iterator[_Session]:
    session = _SESSION.get()._replace(**changes)
    token = _SESSION.set(session)
    try:
        yield session
    finally:
        _SESSION.reset(token)


def probing() -> bool:
    """Whether this is `pcache.fingerprint`'s probe."""
    return _SESSION.get().probe


def probe():
    """A context where lowerings raise their key instead of lowering."""
    return _with(probe=True)


def handing_digest(jaxpr, digest: _canon.JaxprDigest):
    """A context where the lowering of ``jaxpr`` takes ``digest`` as its own."""
    return _with(handed=(jaxpr, digest))


def _lower_ctx(closed_jaxpr, fun_name, kwargs: dict, probe: bool) -> LowerCtx:
    return LowerCtx(
        closed_jaxpr,
        kwargs.get("keep_unused"),
        fun_name,
        kwargs.get("compiler_options_kvs", ()),
        kwargs.get("lowering_platforms"),
        kwargs.get("pgle_profiler"),
        probe,
    )


@contextlib.contextmanager
def lowering(closed_jaxpr, fun_name, kwargs: dict) -> Iterator[LowerCtx]:
    """The session of one `lower_sharding_computation(closed_jaxpr, _, fun_name,
    ..., **kwargs)` call, for the calls it makes."""
    session = _SESSION.get()
    ctx = _lower_ctx(closed_jaxpr, fun_name, kwargs, session.probe)
    if session.handed is not None and session.handed[0] is closed_jaxpr:
        ctx.jaxpr_digest = session.handed[1]
    with _with(lowering=ctx):
        yield ctx


def current() -> LowerCtx | None:
    """The record of the lowering running in this context, if pcache saw it start."""
    return _SESSION.get().lowering


def note_device_assignment(out: tuple) -> None:
    """The running lowering's backend and devices, as JAX chose them (``out``:
    what `_get_and_check_device_assignment` returned)."""
    ctx = _SESSION.get().lowering
    if ctx is not None:
        backend, device_assignment, _ = out
        ctx.backend = backend
        ctx.device_list = (
            None if device_assignment is None else _compat.create_device_list(device_assignment)
        )


def adopted(lower_sharding_computation: Any, lowered_jaxpr) -> LowerCtx | None:
    """The record of a lowering already running when pcache was installed: JAX
    starts its backends, and with them pcache's plugin under ``JAX_PCACHE_DIR``
    alone, inside the device assignment of a process's first lowering. Built from
    that call's own arguments and device assignment, as `lowering` and
    `note_device_assignment` would have, so the first program gets the key every
    later process computes for it."""
    found = _compat.inflight_lowering(lower_sharding_computation, lowered_jaxpr)
    if found is None:
        return None
    closed_jaxpr, _api_name, fun_name = found.args[:3]
    ctx = _lower_ctx(closed_jaxpr, fun_name, found.kwargs, False)
    ctx.backend = found.backend
    devices = found.device_assignment
    ctx.device_list = None if devices is None else _compat.create_device_list(devices)
    return ctx
