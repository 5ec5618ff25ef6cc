"""Loading: from an entry's bytes to a ready executable, and what an entry records
to be loaded that way again (by a lookup, or by the preload thread).

`Loaded` is the memory tier's value. `load_params` is what a preload needs to
deserialize an entry without lowering (stored in the entry's signed head), and
`preload_fns` the two functions the preload thread checks and loads with.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from pcache import _compat, _config, _host, _key, _memos
from pcache._key import Predicted
from pcache._replay import NO_REPLAY, Replay


class Loaded(NamedTuple):
    """A memory-tier value: the executable and what must outlive it.

    ``keepalive`` and ``host_callbacks`` are empty for anything from the store. A
    program with host callbacks (``replay.host_callbacks``) is never handed to JAX as
    found here: a hit lowers it again and `bind`s its bytes, ``raw``, to the
    callbacks of that lowering (an entry from the store has no ``executable`` until
    then). Bound, it keeps its callbacks and the module they belong to.
    """

    executable: Any
    keepalive: tuple = ()
    host_callbacks: tuple = ()
    module: Any = None  # callback programs: the lowered module those callbacks belong to
    # MeshComputations built around this executable, by `_pjit_lower` memo key; kept
    # here so the memory tier's eviction drops them with the executable. None: not
    # reusable that way (a callback program's computation holds its callbacks).
    computations: dict | None = None
    replay: Replay = NO_REPLAY  # what the lowering did besides the module (see `Replay`)
    raw: bytes | None = None  # callback programs: the serialized executable, to bind


def loaded(
    executable, keepalive=(), host_callbacks=(), module=None, replay=None, raw=None
) -> Loaded:
    replay = replay or NO_REPLAY
    computations = None if replay.host_callbacks else {}
    return Loaded(
        executable,
        tuple(keepalive),
        tuple(host_callbacks),
        module,
        computations,
        replay,
        raw if replay.host_callbacks else None,
    )


def unbound(raw: bytes, replay: Replay) -> Loaded:
    """A callback program's bytes, for `bind` (no executable yet)."""
    return loaded(None, replay=replay, raw=raw)


def load_entry(raw: bytes, replay_json, backend, predicted: Predicted) -> Loaded:
    """An entry from the store, ready to run (or, with host callbacks, to `bind`):
    its replay record is checked and its custom-call kernels initialized before
    the executable is deserialized."""
    replay = Replay.from_json(replay_json)
    replay.initialize_kernels()
    if replay.host_callbacks:
        return unbound(raw, replay)
    return loaded(deserialize(raw, backend, predicted), replay=replay)


def bind(found: Loaded, out, backend, predicted: Predicted) -> Loaded | None:
    """A stored executable for the program ``out`` lowered to (`_cached_lowering_to_hlo`'s
    result: a `CacheKey.relower` key names that module), bound to the host callbacks
    ``out`` registered; None if their number is not the one it was compiled with,
    or nothing can be bound. One without callbacks is used as found."""
    module, keepalive, host_callbacks = out[0], out[1], out[2]
    replay = found.replay
    if keepalive or len(host_callbacks) != replay.host_callbacks:
        return None
    if not host_callbacks:
        if found.executable is None:
            return None
        return Loaded(found.executable, (), (), module, None, NO_REPLAY)
    if found.raw is None:
        return None
    exe = deserialize(found.raw, backend, predicted, host_callbacks)
    # The program was lowered for real: nothing of its record is replayed.
    return loaded(
        exe, (), host_callbacks, module, Replay(host_callbacks=replay.host_callbacks), found.raw
    )


# id(backend) -> (backend, working-set name); the backend is kept and compared, so
# a recycled id() (after jax.clear_backends) never names another backend's set.
_SET_NAMES: dict[int, tuple[Any, str]] = _memos.memo("load.set_names", {})


def working_set_name(backend) -> str:
    """The working set a lookup on ``backend`` belongs to: this program on this
    backend and device kind (and process, in a multi-process run), with this JAX."""
    got = _SET_NAMES.get(id(backend))
    name = got[1] if got is not None and got[0] is backend else None
    if name is None:
        d0 = backend.local_devices()[0]
        proc = ""
        count = len({getattr(d, "process_index", 0) for d in backend.devices()})
        if count > 1:
            proc = f", process {backend.process_index()}/{count}"
        name = (
            f"{_config.program_name()} [{backend.platform}/{d0.device_kind}{proc}, "
            f"jax {_compat.JAX_VERSION}, jaxlib {_compat.JAXLIB_VERSION}]"
        )
        _SET_NAMES[id(backend)] = (backend, name)
    return name


def host_class(backend, devices) -> str:
    """The host class of an executable for ``devices`` of ``backend``: the remote
    tier's key space for it (`pcache._host`: the CPU's features on CPU, the device
    kind and the backend's versions on an accelerator)."""
    d0 = next(iter(devices), None)
    kind = d0.device_kind if d0 is not None else ""
    return _host.host_class(backend.platform, backend.platform_version, kind)


LOAD_PARAMS_VERSION = 1


def load_params(backend, predicted: Predicted) -> dict | None:
    """What a preload needs to deserialize an entry as ``_deserialize`` would, and to
    tell first that the entry is for this backend and environment (stored in the
    entry's ``extra``, under its own HMAC); None if not representable in JSON."""
    kvs = [[k, v] for k, v in predicted.compiler_options_kvs]
    if predicted.env is None or not all(isinstance(v, (str, bool, int, float)) for _, v in kvs):
        return None
    devices = list(predicted.device_list)
    return {
        "v": LOAD_PARAMS_VERSION,
        "platform": backend.platform,
        "platform_version": backend.platform_version,
        "jax": _compat.JAX_VERSION,
        "jaxlib": _compat.JAXLIB_VERSION,
        "env": predicted.env,
        "tuple_args": bool(predicted.tuple_args),
        "allow_in": [bool(b) for b in predicted.allow_in],
        "allow_out": [bool(b) for b in predicted.allow_out],
        "compiler_options": kvs,
        "device_ids": [d.id for d in devices],
        "device_kinds": [d.device_kind for d in devices],
        "process_indices": [getattr(d, "process_index", 0) for d in devices],
    }


def load_signature(predicted: Predicted) -> tuple:
    """How an executable is loaded: compared before a preloaded one is used."""
    return (
        predicted.env,
        bool(predicted.tuple_args),
        tuple(bool(b) for b in predicted.allow_in),
        tuple(bool(b) for b in predicted.allow_out),
        # As XLA applies them (last one wins) and as the key has them.
        tuple(sorted(dict(predicted.compiler_options_kvs).items())),
        tuple(predicted.device_list),
    )


def preload_fns(backend, env: str):
    """``(usable, load)`` for the preload thread. ``usable(params)``: whether an entry
    with these load parameters was written for this backend, this process and the
    environment ``env`` the program runs under (taken on the main thread) and can be
    loaded the same way from this thread. ``load(raw, params)``: deserialize it."""
    devices = {d.id: d for d in backend.devices()}
    me = backend.process_index()

    def chosen(params: dict):
        devs = [devices.get(i) for i in params["device_ids"]]
        if (
            any(d is None for d in devs)
            or [d.device_kind for d in devs] != params["device_kinds"]
            or [getattr(d, "process_index", 0) for d in devs] != params["process_indices"]
            or all(getattr(d, "process_index", 0) != me for d in devs)
        ):
            return None
        return devs

    def usable(params: dict) -> bool:
        # Deserializing with another backend's, build's or configuration's options can
        # abort the process inside XLA: only ever load what was written for this one.
        try:
            return (
                params.get("v") == LOAD_PARAMS_VERSION
                and params["platform"] == backend.platform
                and params["platform_version"] == backend.platform_version
                and params["jax"] == _compat.JAX_VERSION
                and params["jaxlib"] == _compat.JAXLIB_VERSION
                and params["env"] == env
                # This thread builds compile options from the configuration it sees,
                # which must be the one the main thread keyed with.
                and _key.environment(backend)[1] == env
                and chosen(params) is not None
            )
        except (KeyError, TypeError, AttributeError):
            return False

    def load(raw: bytes, params: dict, replay):
        if not usable(params):
            return None
        predicted = Predicted(
            env=params["env"],
            tuple_args=bool(params["tuple_args"]),
            allow_in=tuple(bool(b) for b in params["allow_in"]),
            allow_out=tuple(bool(b) for b in params["allow_out"]),
            device_list=_compat.create_device_list(tuple(chosen(params))),
            compiler_options_kvs=tuple((k, v) for k, v in params["compiler_options"]),
        )
        return load_entry(raw, replay, backend, predicted), load_signature(predicted)

    return usable, load


def deserialize(raw: bytes, backend, predicted: Predicted, host_callbacks=()):
    options = _compat.compile_options(
        backend,
        predicted.device_list,
        predicted.compiler_options_kvs,
        predicted.tuple_args,
        predicted.allow_in,
        predicted.allow_out,
    )
    if host_callbacks:
        return backend.deserialize_executable(
            raw, predicted.device_list, options, host_callbacks=list(host_callbacks)
        )
    return backend.deserialize_executable(raw, predicted.device_list, options)
