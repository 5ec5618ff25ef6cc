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
from collections.abc import Callable, Mapping
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


def parse_positive(text: str | int) -> int:
    """A positive integer such as ``2``."""
    n = parse_count(text)
    if n < 1:
        raise ConfigError(f"invalid count {text!r}; expected a positive integer such as 2")
    return n


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


class _Unset:
    """An option not given: its variable, else its default."""

    def __repr__(self) -> str:
        return "<$JAX_PCACHE_* or default>"


_UNSET: Any = _Unset()


def parse_names(v: Any) -> tuple[str, ...]:
    """``"A,B_*"`` (or a sequence of names) -> ``("A", "B_*")``: environment variable
    names, each optionally ending in ``*`` (a prefix)."""
    items = v.split(",") if isinstance(v, str) else list(v)
    out = tuple(str(n).strip() for n in items if str(n).strip())
    for n in out:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*\*?", n):
            raise ConfigError(f"not a variable name (or NAME_*): {n!r}")
    return out


def parse_gain(v: Any) -> float:
    """A non-negative factor such as ``1`` or ``0.5`` (``0``: off)."""
    try:
        g = float(v) if not isinstance(v, bool) else -1.0
    except (TypeError, ValueError):
        g = -1.0
    if not 0 <= g < float("inf"):
        raise ConfigError(f"invalid factor {v!r}; expected a non-negative number such as 1")
    return g


def parse_flag(v: Any) -> bool:
    """A switch: ``True``/``False`` as given, or a variable's text (`BOOL_FORMS`)."""
    return v if isinstance(v, bool) else parse_bool(str(v))


def _remote_arg(v: Any) -> str | None:
    """``enable(remote=...)``: a URL, or ``False`` for none."""
    if v is False or v == "":
        return None
    if not isinstance(v, str):
        raise ConfigError(f"expected a redis:// URL or False, got {v!r}")
    return _remote_url(v)


@dataclasses.dataclass(frozen=True)
class Option:
    """One setting: `pcache.enable`'s keyword ``name``, the variable ``env``, and how
    both are read. Every reader of settings (the environment, `enable`, ``pcache
    env``, the CLI's help) is derived from `OPTIONS`: adding a setting is one row."""

    name: str
    env: str
    parse: Callable[[Any], Any]  # an argument or the variable's text -> the value
    default: Any
    help: str
    #: What an explicit ``None`` argument means (``max_disk_bytes=None``: unbounded);
    #: `_UNSET`: ``None`` means "not given" (the variable, else the default).
    none: Any = _UNSET
    #: Not an `enable` keyword: only a variable (``JAX_PCACHE_DISABLE``).
    keyword: bool = True
    #: "remote": one of the remote tier's settings (`Settings.remote`).
    group: str = ""


OPTIONS: tuple[Option, ...] = (
    Option(
        "path",
        "JAX_PCACHE_DIR",
        lambda v: Path(v).expanduser(),
        None,
        "cache directory; setting it switches pcache on with no code change",
    ),
    Option(
        "max_disk_bytes",
        "JAX_PCACHE_MAX_DISK",
        parse_size,
        DEFAULT_MAX_DISK,
        f"byte bound of the on-disk store ({SIZE_FORMS}); default 10GB",
        none=None,
    ),
    Option(
        "max_memory_bytes",
        "JAX_PCACHE_MAX_MEMORY",
        parse_size,
        DEFAULT_MAX_MEMORY,
        f"byte bound of the in-memory tier ({SIZE_FORMS}); default 1GiB",
        none=UNBOUNDED,
    ),
    Option(
        "disable",
        "JAX_PCACHE_DISABLE",
        parse_flag,
        False,
        f"switch pcache off even when JAX_PCACHE_DIR is set ({BOOL_FORMS})",
        keyword=False,
    ),
    Option(
        "raise_errors",
        "JAX_PCACHE_RAISE_ERRORS",
        parse_flag,
        False,
        f"raise cache errors instead of warning (tests) ({BOOL_FORMS})",
    ),
    Option(
        "explain",
        "JAX_PCACHE_EXPLAIN",
        parse_flag,
        False,
        f"log, for every miss, which key parts differ from the nearest entries ({BOOL_FORMS})",
    ),
    Option(
        "check",
        "JAX_PCACHE_CHECK",
        parse_flag,
        False,
        "recompute every memoized digest, verdict and key from scratch and raise "
        f"pcache.CheckError on any difference (tests; slow) ({BOOL_FORMS})",
    ),
    Option(
        "lock_timeout",
        "JAX_PCACHE_LOCK_TIMEOUT",
        parse_age,
        DEFAULT_LOCK_TIMEOUT,
        f"how long to wait for another process compiling the same key ({AGE_FORMS})",
    ),
    Option(
        "lock_stale",
        "JAX_PCACHE_LOCK_STALE",
        parse_age,
        DEFAULT_LOCK_STALE,
        "how long a process holding a compile lock may go without a heartbeat (stopped, "
        f"hung) before waiters stop waiting for it ({AGE_FORMS}); default 30s",
    ),
    Option(
        "trace_reuse",
        "JAX_PCACHE_TRACE_REUSE",
        parse_flag,
        True,
        "serve a re-created jit(grad(f)), lambda, partial or nested def the trace of an "
        f"equal callable traced before ({BOOL_FORMS}); default on",
    ),
    Option(
        "trace_persist",
        "JAX_PCACHE_TRACE_PERSIST",
        parse_flag,
        False,
        "store top-level traces and serve them to a new process whose callable is equal "
        f"by content: it does not trace ({BOOL_FORMS}); default off (opt-in: trace-time "
        "I/O and randomness are not seen, docs/design-trace-persist.md)",
    ),
    Option(
        "trace_persist_min_gain",
        "JAX_PCACHE_TRACE_PERSIST_MIN_GAIN",
        parse_gain,
        1.0,
        "store a persisted trace only when tracing it took this many times what serving "
        "it costs (its content key and decode, measured when written); a callable not "
        "stored is remembered, and its later calls skip the lookup (a non-negative "
        "factor; 0: store every trace, look every call up)",
        keyword=False,
    ),
    Option(
        "trace_persist_env_ignore",
        "JAX_PCACHE_TRACE_PERSIST_ENV_IGNORE",
        parse_names,
        (),
        "environment variables that change nothing a trace does, left out of persisted "
        "traces' keys (comma-separated names, a trailing * for a prefix: SLURM_*); every "
        "other variable is in the key but the shell's and the terminal's",
    ),
    Option(
        "trace_record_after",
        "JAX_PCACHE_TRACE_RECORD_AFTER",
        parse_positive,
        2,
        "record a trace for reuse when its callable key is traced for the Nth time (a "
        "positive integer); default 2: a program traced once, as most of a library's "
        "are, pays no recording; 1 with trace_persist",
    ),
    Option(
        "remote",
        "JAX_PCACHE_REMOTE",
        _remote_arg,
        None,
        "a shared remote tier behind the local store: redis://host:port/db, rediss://... "
        "or unix:///path/to/socket?db=0 (Redis or Valkey); one compile per program across "
        "a fleet",
    ),
    Option(
        "remote_secret_file",
        "JAX_PCACHE_REMOTE_SECRET_FILE",
        os.fspath,
        None,
        "the fleet key that signs remote entries: a file of at least 16 random bytes only "
        "its owner may read (without it the remote tier is off)",
        group="remote",
    ),
    Option(
        "remote_namespace",
        "JAX_PCACHE_REMOTE_NAMESPACE",
        lambda v: str(v).strip(),
        "default",
        "keeps fleets apart in one Redis (1-64 of A-Z a-z 0-9 . _ -; another one switches "
        "the remote tier off); default 'default'",
        group="remote",
    ),
    Option(
        "remote_read_only",
        "JAX_PCACHE_REMOTE_READ_ONLY",
        parse_flag,
        False,
        f"read the remote tier, never write it ({BOOL_FORMS})",
        group="remote",
    ),
    Option(
        "remote_ttl",
        "JAX_PCACHE_REMOTE_TTL",
        parse_age,
        0.0,
        f"expire remote entries unused for this long ({AGE_FORMS}); default: never "
        "(Redis's maxmemory policy evicts)",
        group="remote",
    ),
    Option(
        "remote_timeout",
        "JAX_PCACHE_REMOTE_TIMEOUT",
        parse_age,
        2.0,
        f"per-command and connect timeout of the remote tier ({AGE_FORMS}); default 2s; "
        "a remote that fails or times out is off until it answers again (retried after "
        "a pause that grows while it fails)",
        group="remote",
    ),
    Option(
        "remote_lease",
        "JAX_PCACHE_REMOTE_LEASE",
        parse_age,
        30.0,
        "how long a host's claim on compiling a program lasts without renewal (renewed "
        f"while it compiles; a dead host's expires) ({AGE_FORMS}); default 30s",
        group="remote",
    ),
    Option(
        "remote_chunk_bytes",
        "JAX_PCACHE_REMOTE_CHUNK_BYTES",
        parse_size,
        1 << 20,
        "a remote value longer than this (compressed) is stored in chunks of this size; "
        "one up to it (and up to 1 MiB) is stored with its head and read in one command; "
        "default 1MiB",
        group="remote",
    ),
    Option(
        "preload",
        "JAX_PCACHE_PRELOAD",
        parse_count,
        DEFAULT_PRELOAD,
        "how many executables of this program's previous run to load on a background "
        "thread at start-up (a non-negative integer; 0 = off); default "
        f"{DEFAULT_PRELOAD}",
    ),
)
_BY_NAME = {o.name: o for o in OPTIONS}

#: Every ``JAX_PCACHE_*`` variable and what it does (``pcache env``, the CLI's help).
ENV_VARS = {o.env: o.help for o in OPTIONS}
#: `pcache.enable`'s keywords (beside the cache directory, its first argument).
KEYWORDS = tuple(o.name for o in OPTIONS if o.keyword and o.name != "path")


@dataclasses.dataclass(frozen=True)
class Settings:
    """One enabled pcache's options, each decided once: the argument given to
    `pcache.enable`, else the ``JAX_PCACHE_*`` variable, else the default. Each
    option of `OPTIONS` is an attribute (``settings.max_disk_bytes``); the remote
    tier's are one, ``settings.remote`` (a `pcache._remote.RemoteConfig`, or None)."""

    path: Path
    values: Mapping[str, Any]
    #: The remote tier (`pcache._remote.RemoteConfig`), None when there is none.
    remote: Any = None

    def __getattr__(self, name: str) -> Any:
        try:
            return self.__dict__["values"][name]
        except KeyError:
            raise AttributeError(name) from None

    @property
    def layout(self) -> Layout:
        return Layout(self.path)

    @classmethod
    def resolve(
        cls,
        path: str | Path | None = None,
        *,
        environ: Mapping[str, str] | None = None,
        **arguments: Any,
    ) -> Settings:
        unknown = sorted(set(arguments) - set(KEYWORDS))
        if unknown:
            close = difflib.get_close_matches(unknown[0], KEYWORDS, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise TypeError(f"pcache.enable() got an unexpected keyword {unknown[0]!r}{hint}")
        env = read_env(environ)
        values: dict[str, Any] = {}
        for o in OPTIONS:
            given = arguments.get(o.name, _UNSET)
            if given is None and o.none is not _UNSET:
                values[o.name] = o.none  # ``max_disk_bytes=None``: unbounded
            elif given is not None and given is not _UNSET:
                try:
                    values[o.name] = o.parse(given)
                except ConfigError as exc:
                    raise ConfigError(f"{o.name}: {exc}") from None
            else:
                values[o.name] = env.get(o.name, o.default)
        given_path = Path(path).expanduser() if path is not None else values.pop("path")
        directory = given_path or default_cache_dir(environ)
        return cls(
            path=directory.resolve(),
            values={k: v for k, v in values.items() if not _BY_NAME[k].group},
            remote=_remote_config(values),
        )


def _remote_config(values: Mapping[str, Any]) -> Any:
    """The remote tier's settings, or None when there is no remote."""
    if values["remote"] is None:
        return None
    from pcache import _remote

    config = _remote.RemoteConfig(
        url=values["remote"],
        secret_file=values["remote_secret_file"],
        namespace=values["remote_namespace"],
        read_only=values["remote_read_only"],
        ttl=values["remote_ttl"] or None,
        timeout=values["remote_timeout"],
        lease=values["remote_lease"],
        chunk_bytes=values["remote_chunk_bytes"],
        wait=values["lock_timeout"],  # the local-lock wait and the lease wait: one bound
    )
    # A malformed namespace switches the remote tier off (one warning, when it is
    # opened: `pcache._remote.Remote`), never the local tier.
    if config.timeout <= 0 or config.lease <= 0:
        raise ConfigError("remote timeout and lease must be positive")
    if not 0 < config.chunk_bytes <= 256 << 20:  # Redis refuses values over 512 MB
        raise ConfigError("remote chunk size must be between 1 byte and 256 MiB")
    return config


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


def read_env(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Every ``JAX_PCACHE_*`` variable that is set (and not blank), parsed and
    validated, by option name. An unknown one (a typo, or a newer pcache's in a
    shared environment) is logged once, with the closest known name, and ignored: it
    never switches pcache off."""
    env = os.environ if environ is None else environ
    for name in sorted(k for k in env if k.startswith("JAX_PCACHE_") and k not in ENV_VARS):
        _warn_unknown(name)
    out: dict[str, Any] = {}
    for o in OPTIONS:
        raw = env.get(o.env)
        if raw is None or raw.strip() == "":
            continue
        try:
            out[o.name] = o.parse(raw)
        except ConfigError as exc:
            raise ConfigError(f"{o.env}: {exc}") from None
    return out


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
