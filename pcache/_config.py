"""Settings: sizes, ages, the cache directory and the ``JAX_PCACHE_*`` environment.

Environment variables are read once, validated, and a malformed value raises
:class:`ConfigError` naming the accepted forms (never silently ignored).
`Settings.resolve` is the one place an option is decided (argument, then
environment, then default); `Layout` is the one place the cache directory's
layout is spelled.
"""

from __future__ import annotations

import dataclasses
import difflib
import logging
import os
import re
import stat
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pcache._errors import PcacheError


class ConfigError(PcacheError, ValueError):
    """A setting (argument or environment variable) has a malformed value."""


_SIZE_UNITS = {
    "": 1,
    "B": 1,
    "K": 1000,
    "KB": 1000,
    "M": 1000**2,
    "MB": 1000**2,
    "G": 1000**3,
    "GB": 1000**3,
    "T": 1000**4,
    "TB": 1000**4,
    "KIB": 1024,
    "MIB": 1024**2,
    "GIB": 1024**3,
    "TIB": 1024**4,
}
SIZE_FORMS = "a byte count or a number with a unit: 1048576, 512KB, 512MiB, 10GB, 1.5GiB, 2TB"

_AGE_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
AGE_FORMS = "a number with a unit s, m, h, d or w: 90s, 30m, 12h, 30d, 2w"

_NUMBER_UNIT = re.compile(r"^\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*([A-Za-z]*)\s*$")


def parse_size(text: str | int) -> int:
    """Parse a byte size such as ``10GB`` or ``512MiB`` (decimal and binary units)."""
    if isinstance(text, int) and not isinstance(text, bool):
        if text < 0:
            raise ConfigError(f"size must not be negative: {text}")
        return text
    m = _NUMBER_UNIT.match(str(text))
    unit = m.group(2).upper() if m else None
    if m is None or unit not in _SIZE_UNITS:
        raise ConfigError(f"invalid size {text!r}; expected {SIZE_FORMS}")
    return int(float(m.group(1)) * _SIZE_UNITS[unit])


def parse_age(text: str | float) -> float:
    """Parse an age such as ``30d`` or ``12h`` into seconds."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        if text < 0:
            raise ConfigError(f"age must not be negative: {text}")
        return float(text)
    m = _NUMBER_UNIT.match(str(text))
    unit = m.group(2).lower() if m else None
    if m is None or unit not in _AGE_UNITS:
        raise ConfigError(f"invalid age {text!r}; expected {AGE_FORMS}")
    return float(m.group(1)) * _AGE_UNITS[unit]


def format_size(n: float) -> str:
    """``1536`` -> ``'1.5 KiB'``."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"", "0", "false", "no", "off"}
BOOL_FORMS = "1/true/yes/on or 0/false/no/off"


def parse_bool(text: str, name: str = "value") -> bool:
    v = text.strip().lower()
    if v in _TRUE:
        return True
    if v in _FALSE:
        return False
    raise ConfigError(f"invalid {name} {text!r}; expected {BOOL_FORMS}")


def default_cache_dir(environ: Mapping[str, str] | None = None) -> Path:
    """``$JAX_PCACHE_DIR``, else ``$XDG_CACHE_HOME/pcache``, else ``~/.cache/pcache``."""
    env = os.environ if environ is None else environ
    if env.get("JAX_PCACHE_DIR"):
        return Path(env["JAX_PCACHE_DIR"]).expanduser()
    base = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "pcache"


def parse_count(text: str | int) -> int:
    """A non-negative integer such as ``256`` (``0`` switches the feature off)."""
    if isinstance(text, int) and not isinstance(text, bool) and text >= 0:
        return text
    t = str(text).strip()
    if not (t.isascii() and t.isdigit()):
        raise ConfigError(f"invalid count {text!r}; expected a non-negative integer such as 256")
    return int(t)


DEFAULT_PRELOAD = 256
DEFAULT_MAX_DISK = 10 * 1000**3
DEFAULT_MAX_MEMORY = 1024**3
DEFAULT_LOCK_TIMEOUT = 600.0
DEFAULT_LOCK_STALE = 30.0
UNBOUNDED = 1 << 62


@dataclasses.dataclass(frozen=True)
class Layout:
    """Where things live in a cache directory (``$JAX_PCACHE_DIR``)::

    secret.key       the HMAC secret (mode 0600)
    locks/           single-flight lock and heartbeat files
    store/           the store: store.db (+ -wal, -shm), store.lock, values/
    """

    root: Path

    SECRET = "secret.key"
    LOCKS = "locks"
    STORE = "store"
    STORE_DB = "store.db"

    @property
    def secret(self) -> Path:
        return self.root / self.SECRET

    @property
    def locks(self) -> Path:
        return self.root / self.LOCKS

    @property
    def store(self) -> Path:
        return self.root / self.STORE

    @classmethod
    def store_dir_of(cls, directory: Path) -> Path:
        """The store of ``directory``: ``directory/store`` in a pcache directory,
        ``directory`` itself when it is a bare store directory."""
        inner = cls(directory).store
        if not (directory / cls.STORE_DB).exists() and inner.is_dir():
            return inner
        return directory


_UNSET: object = object()


@dataclasses.dataclass(frozen=True)
class Settings:
    """One enabled pcache's options, each decided once: the argument given to
    `pcache.enable`, else the ``JAX_PCACHE_*`` variable, else the default."""

    path: Path
    max_disk_bytes: int | None
    max_memory_bytes: int
    raise_errors: bool
    lock_timeout: float
    lock_stale: float
    explain: bool
    preload: int
    check: bool
    trace_reuse: bool = True
    #: The remote tier (`pcache._remote.RemoteConfig`), None when there is none.
    remote: Any = None

    @property
    def layout(self) -> Layout:
        return Layout(self.path)

    @classmethod
    def resolve(
        cls,
        path: str | Path | None = None,
        *,
        max_disk_bytes: int | str | None = _UNSET,  # type: ignore[assignment]
        max_memory_bytes: int | str | None = _UNSET,  # type: ignore[assignment]
        raise_errors: bool | None = None,
        lock_timeout: float | str | None = None,
        lock_stale: float | str | None = None,
        explain: bool | None = None,
        preload: int | str | None = None,
        check: bool | None = None,
        trace_reuse: bool | None = None,
        remote: str | bool | None = None,
        remote_secret_file: str | os.PathLike | None = None,
        remote_namespace: str | None = None,
        remote_read_only: bool | None = None,
        remote_ttl: float | str | None = None,
        remote_timeout: float | str | None = None,
        remote_lease: float | str | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> Settings:
        env = read_env(environ)

        def pick(arg, from_env, default):
            if arg is not None and arg is not _UNSET:
                return arg
            return from_env if from_env is not None else default

        if max_disk_bytes is _UNSET:
            max_disk_bytes = pick(None, env.max_disk, DEFAULT_MAX_DISK)
        if max_memory_bytes is _UNSET:
            max_memory_bytes = pick(None, env.max_memory, DEFAULT_MAX_MEMORY)
        directory = Path(path).expanduser() if path is not None else default_cache_dir(environ)
        lock_timeout_s = parse_age(pick(lock_timeout, env.lock_timeout, DEFAULT_LOCK_TIMEOUT))
        url = env.remote if remote is None else (remote or None)
        remote_config = None
        if url is not None:
            if not isinstance(url, str):
                raise ConfigError(f"remote: expected a redis:// URL or False, got {url!r}")
            from pcache import _remote

            secret_file = pick(remote_secret_file, env.remote_secret_file, None)
            ttl = parse_age(pick(remote_ttl, env.remote_ttl, 0))
            remote_config = _remote.RemoteConfig(
                url=url,
                secret_file=None if secret_file is None else os.fspath(secret_file),
                namespace=str(pick(remote_namespace, env.remote_namespace, "default")),
                read_only=bool(pick(remote_read_only, env.remote_read_only, False)),
                ttl=ttl or None,
                timeout=parse_age(
                    pick(remote_timeout, env.remote_timeout, _remote.DEFAULT_TIMEOUT)
                ),
                lease=parse_age(pick(remote_lease, env.remote_lease, _remote.DEFAULT_LEASE)),
                wait=lock_timeout_s,
            )
            # A malformed namespace switches the remote tier off (one warning, when it
            # is opened: `pcache._remote.Remote`), never the local tier.
            if remote_config.timeout <= 0 or remote_config.lease <= 0:
                raise ConfigError("remote timeout and lease must be positive")
        return cls(
            path=directory.resolve(),
            max_disk_bytes=None if max_disk_bytes is None else parse_size(max_disk_bytes),
            max_memory_bytes=(
                UNBOUNDED if max_memory_bytes is None else parse_size(max_memory_bytes)
            ),
            raise_errors=bool(pick(raise_errors, env.raise_errors, False)),
            lock_timeout=lock_timeout_s,
            lock_stale=parse_age(pick(lock_stale, env.lock_stale, DEFAULT_LOCK_STALE)),
            explain=bool(pick(explain, env.explain, False)),
            preload=parse_count(pick(preload, env.preload, DEFAULT_PRELOAD)),
            check=bool(pick(check, env.check, False)),
            trace_reuse=bool(pick(trace_reuse, env.trace_reuse, True)),
            remote=remote_config,
        )


@dataclasses.dataclass(frozen=True)
class EnvSettings:
    """The ``JAX_PCACHE_*`` environment, parsed and validated."""

    dir: str | None
    max_disk: int | None
    max_memory: int | None
    disable: bool
    raise_errors: bool
    explain: bool
    lock_timeout: float | None
    preload: int | None
    check: bool = False
    lock_stale: float | None = None
    trace_reuse: bool | None = None
    remote: str | None = None
    remote_secret_file: str | None = None
    remote_namespace: str | None = None
    remote_read_only: bool | None = None
    remote_ttl: float | None = None
    remote_timeout: float | None = None
    remote_lease: float | None = None


ENV_VARS = {
    "JAX_PCACHE_DIR": "cache directory; setting it switches pcache on with no code change",
    "JAX_PCACHE_MAX_DISK": f"byte bound of the on-disk store ({SIZE_FORMS}); default 10GB",
    "JAX_PCACHE_MAX_MEMORY": f"byte bound of the in-memory tier ({SIZE_FORMS}); default 1GiB",
    "JAX_PCACHE_DISABLE": f"switch pcache off even when JAX_PCACHE_DIR is set ({BOOL_FORMS})",
    "JAX_PCACHE_RAISE_ERRORS": f"raise cache errors instead of warning (tests) ({BOOL_FORMS})",
    "JAX_PCACHE_EXPLAIN": f"log, for every miss, which key parts differ from the nearest entries ({BOOL_FORMS})",
    "JAX_PCACHE_CHECK": (
        "recompute every memoized digest, verdict and key from scratch and raise "
        f"pcache.CheckError on any difference (tests; slow) ({BOOL_FORMS})"
    ),
    "JAX_PCACHE_LOCK_TIMEOUT": f"how long to wait for another process compiling the same key ({AGE_FORMS})",
    "JAX_PCACHE_LOCK_STALE": (
        "how long a process holding a compile lock may go without a heartbeat (stopped, "
        f"hung) before waiters stop waiting for it ({AGE_FORMS}); default 30s"
    ),
    "JAX_PCACHE_TRACE_REUSE": (
        "serve a re-created jit(grad(f)), lambda, partial or nested def the trace of an equal "
        f"callable traced before ({BOOL_FORMS}); default on"
    ),
    "JAX_PCACHE_REMOTE": (
        "a shared remote tier behind the local store: redis://host:port/db, rediss://... or "
        "unix:///path/to/socket?db=0 (Redis or Valkey); one compile per program across a fleet"
    ),
    "JAX_PCACHE_REMOTE_SECRET_FILE": (
        "the fleet key that signs remote entries: a file of at least 16 random bytes only its "
        "owner may read (without it the remote tier is off)"
    ),
    "JAX_PCACHE_REMOTE_NAMESPACE": (
        "keeps fleets apart in one Redis (1-64 of A-Z a-z 0-9 . _ -; another one switches the "
        "remote tier off); default 'default'"
    ),
    "JAX_PCACHE_REMOTE_READ_ONLY": f"read the remote tier, never write it ({BOOL_FORMS})",
    "JAX_PCACHE_REMOTE_TTL": (
        f"expire remote entries unused for this long ({AGE_FORMS}); default: never (Redis's "
        "maxmemory policy evicts)"
    ),
    "JAX_PCACHE_REMOTE_TIMEOUT": (
        f"per-command and connect timeout of the remote tier ({AGE_FORMS}); default 2s; a "
        "remote that fails or times out is off until it answers again (retried after a pause "
        "that grows while it fails)"
    ),
    "JAX_PCACHE_REMOTE_LEASE": (
        "how long a host's claim on compiling a program lasts without renewal (renewed while "
        f"it compiles; a dead host's expires) ({AGE_FORMS}); default 30s"
    ),
    "JAX_PCACHE_PRELOAD": (
        "how many executables of this program's previous run to load on a background thread "
        f"at start-up (a non-negative integer; 0 = off); default {DEFAULT_PRELOAD}"
    ),
}


_WARNED_UNKNOWN: set[str] = set()


def _warn_unknown(name: str) -> None:
    if name in _WARNED_UNKNOWN:
        return
    _WARNED_UNKNOWN.add(name)
    close = difflib.get_close_matches(name, list(ENV_VARS), n=1, cutoff=0.6)
    hint = f"; did you mean {close[0]}?" if close else ""
    logging.getLogger("pcache").warning(
        "pcache: ignoring unknown environment variable %s%s", name[:80], hint
    )


def read_env(environ: Mapping[str, str] | None = None) -> EnvSettings:
    """Read and validate every ``JAX_PCACHE_*`` variable. An unknown one (a typo, or
    a newer pcache's in a shared environment) is logged once, with the closest known
    name, and ignored: it never switches pcache off."""
    env = os.environ if environ is None else environ
    for name in sorted(k for k in env if k.startswith("JAX_PCACHE_") and k not in ENV_VARS):
        _warn_unknown(name)

    def get(name, parse):
        raw = env.get(name)
        if raw is None or raw.strip() == "":
            return None
        try:
            return parse(raw)
        except ConfigError as exc:
            raise ConfigError(f"{name}: {exc}") from None

    return EnvSettings(
        dir=env.get("JAX_PCACHE_DIR") or None,
        max_disk=get("JAX_PCACHE_MAX_DISK", parse_size),
        max_memory=get("JAX_PCACHE_MAX_MEMORY", parse_size),
        disable=bool(get("JAX_PCACHE_DISABLE", lambda v: parse_bool(v, "JAX_PCACHE_DISABLE"))),
        raise_errors=bool(
            get("JAX_PCACHE_RAISE_ERRORS", lambda v: parse_bool(v, "JAX_PCACHE_RAISE_ERRORS"))
        ),
        explain=bool(get("JAX_PCACHE_EXPLAIN", lambda v: parse_bool(v, "JAX_PCACHE_EXPLAIN"))),
        lock_timeout=get("JAX_PCACHE_LOCK_TIMEOUT", parse_age),
        preload=get("JAX_PCACHE_PRELOAD", parse_count),
        check=bool(get("JAX_PCACHE_CHECK", lambda v: parse_bool(v, "JAX_PCACHE_CHECK"))),
        lock_stale=get("JAX_PCACHE_LOCK_STALE", parse_age),
        trace_reuse=get(
            "JAX_PCACHE_TRACE_REUSE", lambda v: parse_bool(v, "JAX_PCACHE_TRACE_REUSE")
        ),
        remote=get("JAX_PCACHE_REMOTE", _remote_url),
        remote_secret_file=get("JAX_PCACHE_REMOTE_SECRET_FILE", str),
        remote_namespace=get("JAX_PCACHE_REMOTE_NAMESPACE", str.strip),
        remote_read_only=get(
            "JAX_PCACHE_REMOTE_READ_ONLY", lambda v: parse_bool(v, "JAX_PCACHE_REMOTE_READ_ONLY")
        ),
        remote_ttl=get("JAX_PCACHE_REMOTE_TTL", parse_age),
        remote_timeout=get("JAX_PCACHE_REMOTE_TIMEOUT", parse_age),
        remote_lease=get("JAX_PCACHE_REMOTE_LEASE", parse_age),
    )


def _remote_url(text: str) -> str:
    text = text.strip()
    if text.split("://", 1)[0] not in ("redis", "rediss", "unix") or "://" not in text:
        raise ConfigError(
            f"invalid remote {text.split('@')[-1]!r}; expected redis://host:port/db, "
            "rediss://host:port/db or unix:///path/to/socket?db=0"
        )
    return text


# The variables XLA reads its flags from, once, when the backends start.
FLAG_VARS = ("XLA_FLAGS", "LIBTPU_INIT_ARGS")
_FLAGS_AT_START: dict[str, str | None] | None = None


def flag_env_at_backend_start() -> dict[str, str | None]:
    """XLA_FLAGS and LIBTPU_INIT_ARGS as XLA saw them.

    JAX calls ``initialize()`` while it starts its backends, just before it creates
    the clients (which is when XLA parses these variables, once per process), so the
    values taken there are exactly XLA's. Where JAX did not run the plugin (pcache
    used from a source tree without its entry point), the values at pcache's first
    key are the best that can be known.
    """
    global _FLAGS_AT_START
    if _FLAGS_AT_START is None:
        _FLAGS_AT_START = {v: os.environ.get(v) for v in FLAG_VARS}
    return _FLAGS_AT_START


def program_name() -> str:
    """This program, as the next run of it will name itself: ``python -m pkg.mod``
    is the module, a script its real path, anything else ``<interactive>``."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    if spec is not None and getattr(spec, "name", None):
        return f"module {spec.name}"
    argv0 = sys.argv[0] if sys.argv else ""
    if argv0 and argv0 not in ("-c", "-"):
        return f"script {os.path.realpath(argv0)}"
    return "<interactive>"


def untrusted_reasons(path: Path) -> list[str]:
    """Why others may write the cache directory ``path`` (empty: only we may)."""
    try:
        st = os.stat(path)
    except OSError:
        return []
    why = []
    if st.st_uid != os.geteuid():
        why.append(f"owned by uid {st.st_uid}")
    if st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX:
        who = "others" if st.st_mode & 0o002 else "its group"
        why.append(f"writable by {who} (mode {st.st_mode & 0o777:o})")
    return why
