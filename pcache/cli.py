"""The ``pcache`` command line: inspect and maintain a pcache directory.

Modelled on the maintenance commands of ccache and sccache (``ccache -s``, ``-c``,
``-C``, ``--evict-older-than``; ``sccache --show-stats --stats-format json``)::

    pcache stats [--json]            what is cached, hit rate, space used
    pcache ls [--sort F] [--limit N] one row per entry
    pcache gc [--max-size S] [--older-than A] [--stale] [--dry-run]
    pcache verify [--fix]            integrity and every checksum
    pcache clear [--yes]             remove every entry
    pcache explain KEY               metadata and key parts of one entry
    pcache export BUNDLE [filters]   entries (and working sets) into one file
    pcache import BUNDLE             a bundle's entries, re-signed for this directory
    pcache env                       the JAX_PCACHE_* environment variables
    pcache remote ping|stats|gc|push the fleet's remote tier (Redis)

Sizes and ages are parsed only by :mod:`pcache._config`; a malformed one is a
usage error (exit 2) naming the accepted forms.  Errors of the store become a
``click.ClickException`` (exit 1) with a plain message.  JAX is imported only by
``gc --stale`` and ``import`` (unless ``--no-device-check``), which have to ask the
installed JAX what it can load.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import click

from pcache._config import (
    AGE_FORMS,
    DEFAULT_MAX_DISK,
    ENV_VARS,
    SIZE_FORMS,
    ConfigError,
    Layout,
    Settings,
    default_cache_dir,
    format_size,
    parse_age,
    parse_size,
    untrusted_reasons,
)
from pcache.store import (
    Store,
    StoreCorruptError,
    StoreError,
    StoreFullError,
    StoreLockedError,
    StorePermissionError,
    StoreVersionError,
)

STORE_SUBDIR, STORE_DB = Layout.STORE, Layout.STORE_DB  # the layout: pcache._config.Layout

CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"], "max_content_width": 100}

_EPILOG = (
    "\b\nEnvironment:\n"
    + "\n".join(f"  {name}" for name in ENV_VARS)
    + "\n\nRun 'pcache env' for what each one does and its current value."
)


# -- option types ---------------------------------------------------------------------


class SizeType(click.ParamType):
    """A byte size parsed by :func:`pcache._config.parse_size` (``10GB``, ``512MiB``)."""

    name = "size"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        try:
            return parse_size(value)
        except ConfigError as exc:
            self.fail(str(exc), param, ctx)

    def get_metavar(self, param: click.Parameter, ctx: click.Context | None = None) -> str:
        return "SIZE"


class AgeType(click.ParamType):
    """An age parsed by :func:`pcache._config.parse_age` (``30d``, ``12h``), in seconds."""

    name = "age"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        if isinstance(value, float):
            return value
        try:
            return parse_age(value)
        except ConfigError as exc:
            self.fail(str(exc), param, ctx)

    def get_metavar(self, param: click.Parameter, ctx: click.Context | None = None) -> str:
        return "AGE"


SIZE = SizeType()
AGE = AgeType()


def _size(n: int) -> str:
    """A size as given in decimal units when it is a round one (``10 GB``), else binary."""
    for unit, scale in (("TB", 1000**4), ("GB", 1000**3), ("MB", 1000**2), ("KB", 1000)):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}"
    return format_size(n)


def max_size_option(help_text: str) -> Callable:
    return click.option(
        "--max-size",
        "max_size",
        type=SIZE,
        help=f"{help_text} [default: $JAX_PCACHE_MAX_DISK, else {_size(DEFAULT_MAX_DISK)}; "
        f"forms: {SIZE_FORMS}]",
    )


def _settings() -> Settings:
    """The settings pcache itself would run with here (a malformed variable is a
    usage error naming it)."""
    try:
        return Settings.resolve()
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from None


def _limit(max_size: int | None) -> int | None:
    """``--max-size``, else ``$JAX_PCACHE_MAX_DISK``, else the default."""
    return max_size if max_size is not None else _settings().max_disk_bytes


def json_option(fn: Callable) -> Callable:
    return click.option("--json", "as_json", is_flag=True, help="Output JSON (see schemas/).")(fn)


# -- shared state, opening the store ----------------------------------------------------


@dataclasses.dataclass
class _State:
    directory: Path | None  # None: the settings' directory, resolved when a command runs

    def resolve(self) -> Path:
        return self.directory if self.directory is not None else _settings().path


_HINTS = (
    (
        StoreCorruptError,
        "The cache database is damaged. 'pcache verify --fix' moves it aside (kept as "
        "store.db.damaged-*) and starts an empty cache; pcache itself does the same when "
        "it next runs.",
    ),
    (StoreLockedError, "Another process held the cache busy for too long; try again."),
    (StoreVersionError, "A newer pcache wrote this cache; upgrade pcache or use another --dir."),
    (StorePermissionError, "Check the permissions of the cache directory and its files."),
    (StoreFullError, "The disk is full; free space, or shrink the cache with 'pcache gc'."),
)


@contextlib.contextmanager
def _store_errors() -> Iterator[None]:
    """Turn library errors into a one-line ``ClickException`` (exit 1)."""
    try:
        yield
    except StoreError as exc:
        hint = next((h for cls, h in _HINTS if isinstance(exc, cls)), "")
        raise click.ClickException(
            f"{type(exc).__name__}: {exc}" + (f"\n{hint}" if hint else "")
        ) from exc
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from exc


@contextlib.contextmanager
def _open_store(ctx: click.Context, **kw: Any) -> Iterator[Store]:
    """Open the store of ``--dir``.  Nothing is created: a missing directory, or one
    holding no store, is an error (Store() would make both).  A damaged database is
    an error here (``repair=False``) unless a command asks otherwise."""
    directory = ctx.find_object(_State).resolve()
    if not directory.exists():
        raise click.ClickException(
            f"cache directory {directory} does not exist (nothing has been cached there; "
            "pass --dir or set JAX_PCACHE_DIR)"
        )
    if not directory.is_dir():
        raise click.ClickException(f"{directory} is not a directory")
    where = Layout.store_dir_of(directory)
    if not (where / STORE_DB).exists():
        raise click.ClickException(
            f"{directory} holds no pcache store (no {STORE_SUBDIR}/{STORE_DB}); "
            "nothing has been cached there"
        )
    with _store_errors():
        store = Store(where, **{"repair": False, **kw})
        try:
            yield store
        finally:
            store.close()


# -- formatting ---------------------------------------------------------------------------


def _ago(t: float | None, now: float) -> str:
    """``now - t`` as ``'3m ago'``; ``'never'`` for a missing time."""
    if not t:
        return "never"
    d = now - t
    if d < 0:
        return "in the future"
    if d < 1:
        return "just now"
    for unit, seconds in (("d", 86400), ("h", 3600), ("m", 60)):
        if d >= seconds:
            return f"{int(d // seconds)}{unit} ago"
    return f"{int(d)}s ago"


def _seconds(s: float | None) -> str:
    if s is None:
        return "-"
    if s < 60:
        return f"{s:.2f}s"
    if s < 3600:
        return f"{s / 60:.1f}m"
    return f"{s / 3600:.1f}h"


def _timestamp(t: float | None) -> str:
    if not t:
        return "never"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))


def _table(headers: list[str], rows: Iterable[list[str]], right: set[int] = frozenset()) -> str:
    rows = [headers, *rows]
    widths = [max(len(r[i]) for r in rows) for i in range(len(headers))]

    def line(row: list[str]) -> str:
        cells = [
            c.rjust(w) if i in right else c.ljust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        ]
        return "  ".join(cells).rstrip()

    return "\n".join(line(r) for r in rows)


def _echo_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, sort_keys=False))


def _device(e: Any) -> str:
    return f"{e.backend or '?'}/{e.device_kind or '?'}"


def _saved(e: Any) -> float:
    return (e.hits or 0) * (e.compile_seconds or 0.0)


class _Progress:
    """A ``progress(done, total)`` callback for the store drawing a click progress bar.

    The bar goes to stderr, and only when stderr is a terminal and the run has lasted
    longer than ``delay`` seconds: short runs and pipes stay quiet.
    """

    def __init__(self, label: str, *, delay: float = 0.5) -> None:
        self.label = label
        self.delay = delay
        self.enabled = sys.stderr.isatty()
        self._start = time.monotonic()
        self._bar: Any = None
        self._done = 0

    def __call__(self, done: int, total: int) -> None:
        if self._bar is None:
            if not self.enabled or time.monotonic() - self._start < self.delay or not total:
                return
            self._bar = click.progressbar(length=total, label=self.label, file=sys.stderr)
            self._bar.__enter__()
        self._bar.update(max(0, done - self._done))
        self._done = done

    def __enter__(self) -> _Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.__exit__(None, None, None)


# -- the group ------------------------------------------------------------------------------


@click.group(context_settings=CONTEXT_SETTINGS, epilog=_EPILOG)
@click.version_option(package_name="jax-pcache", prog_name="pcache")
@click.option(
    "--dir",
    "directory",
    type=click.Path(file_okay=False, path_type=Path),
    help="The pcache directory (the one given to pcache.enable), or its store/ "
    "subdirectory. [default: $JAX_PCACHE_DIR, else $XDG_CACHE_HOME/pcache, "
    "else ~/.cache/pcache]",
)
@click.pass_context
def cli(ctx: click.Context, directory: Path | None) -> None:
    """Inspect and maintain a pcache directory (JAX's persistent compilation cache).

    \b
    Examples:
        pcache stats
        pcache ls --sort hits --limit 10
        pcache gc --max-size 2GB --older-than 30d --stale
        pcache --dir /scratch/pcache verify --fix
    """
    ctx.obj = _State(directory)


# -- gc ---------------------------------------------------------------------------------------


def _stale_predicate(store: Store) -> tuple[Callable[[Any], bool], dict[str, Any]]:
    """Build ``entry -> True when the installed JAX can never load it``.

    Stale: a jax or jaxlib version other than the installed one, a backend this
    process has no devices for, or a device kind none of that backend's devices has.
    Backends are probed before the store's gc runs, so the predicate is cheap.
    """
    import jax  # noqa: PLC0415  (only gc --stale needs JAX)
    import jaxlib  # noqa: PLC0415

    kinds: dict[str, frozenset[str]] = {}

    def device_kinds(backend: str) -> frozenset[str]:
        if backend not in kinds:
            try:
                devices = jax.devices(backend)
            except (RuntimeError, ValueError):  # "Unknown backend" / no such platform here
                devices = []
            kinds[backend] = frozenset(d.device_kind for d in devices)
        return kinds[backend]

    for e in store.entries():
        if e.backend:
            device_kinds(e.backend)
    installed = {"jax_version": jax.__version__, "jaxlib_version": jaxlib.__version__}

    def stale(e: Any) -> bool:
        if e.jax_version and e.jax_version != installed["jax_version"]:
            return True
        if e.jaxlib_version and e.jaxlib_version != installed["jaxlib_version"]:
            return True
        if e.backend:
            available = device_kinds(e.backend)
            if not available or (e.device_kind and e.device_kind not in available):
                return True
        return False

    installed["backends"] = {b: sorted(k) for b, k in sorted(kinds.items()) if k}
    return stale, installed


@cli.command()
@max_size_option(
    "Evict until the store fits in SIZE (cheapest to recompile per byte, least recently used first)."
)
@click.option("--older-than", type=AGE, help=f"Remove entries not used for AGE ({AGE_FORMS}).")
@click.option(
    "--stale",
    is_flag=True,
    help="Remove entries the installed JAX can never load: other jax/jaxlib versions, "
    "backends or device kinds not present here.",
)
@click.option("--dry-run", is_flag=True, help="Show what would be removed; change nothing.")
@json_option
@click.pass_context
def gc(
    ctx: click.Context,
    max_size: int | None,
    older_than: float | None,
    stale: bool,
    dry_run: bool,
    as_json: bool,
) -> None:
    """Remove entries by size, age and staleness, then give disk space back.

    Corrupt entries are always removed.  When the store is over SIZE (default:
    $JAX_PCACHE_MAX_DISK, else 10 GB) the store's eviction order decides what goes:
    the least compile time saved per stored byte, the least recently used first.

    Safe while other processes read and write the cache: gc holds the store's lock
    against other gc runs only, deletes in short transactions, and deletes rows by
    id, so a value written again meanwhile is never lost.

    \b
    Examples:
        pcache gc                       # enforce the size limit, drop corrupt entries
        pcache gc --older-than 30d      # like ccache --evict-older-than
        pcache gc --stale --dry-run     # what a JAX upgrade left behind
    """
    limit = _limit(max_size)
    with _open_store(ctx) as store:
        predicate, installed = _stale_predicate(store) if stale else (None, None)
        with _Progress("Collecting garbage") as progress:
            result = store.gc(
                max_bytes=limit,
                older_than=older_than,
                predicate=predicate,
                dry_run=dry_run,
                progress=progress,
            )
        after = store.stats()
    from pcache._flight import sweep_locks

    locks_removed = sweep_locks(Layout(ctx.find_object(_State).resolve()).locks, dry_run=dry_run)
    removed = list(result.removed)
    if as_json:
        data = {
            "directory": str(ctx.find_object(_State).resolve()),
            "dry_run": dry_run,
            "max_bytes": limit,
            "older_than_seconds": older_than,
            "stale": stale,
            "removed": [_gc_row(e) for e in removed],
            "removed_count": len(removed),
            "bytes_freed": result.bytes_freed,
            "corrupt_removed": result.corrupt_removed,
            "orphans_removed": result.orphans_removed,
            "locks_removed": locks_removed,
            "entries_after": after["entries"],
            "disk_bytes_before": result.disk_bytes_before,
            "disk_bytes_after": result.disk_bytes_after,
        }
        if installed is not None:
            data["installed"] = installed
        _echo_json(data)
        return
    if removed:
        verb = "Would remove" if dry_run else "Removed"
        noun = "entry" if len(removed) == 1 else "entries"
        click.echo(f"{verb} {len(removed)} {noun} ({format_size(result.bytes_freed)}):")
        rows = [
            [e.key[:12], e.function_name or "?", _device(e), format_size(e.stored_size)]
            for e in removed[:GC_ROWS_SHOWN]
        ]
        _echo_indented(_table(["KEY", "FUNCTION", "BACKEND/DEVICE", "SIZE"], rows, {3}))
        if len(removed) > GC_ROWS_SHOWN:
            click.echo(f"  ... and {len(removed) - GC_ROWS_SHOWN} more (--json lists all)")
    else:
        click.echo("Nothing to remove.")
    if result.corrupt_removed:
        click.echo(f"Corrupt entries removed: {result.corrupt_removed}")
    if result.orphans_removed:
        click.echo(f"Orphan value files removed: {result.orphans_removed}")
    if locks_removed:
        click.echo(f"Stale lock files removed: {locks_removed}")
    click.echo(
        f"Left: {after['entries']} entries, {format_size(after['stored_bytes'])} stored; "
        f"disk {format_size(result.disk_bytes_before)} -> "
        f"{format_size(result.disk_bytes_after)} (limit {_size(limit)})"
    )


#: gc's text output lists this many removed entries, then a count.
GC_ROWS_SHOWN = 20


def _gc_row(e: Any) -> dict[str, Any]:
    return {
        "key": e.key,
        "function_name": e.function_name,
        "backend": e.backend,
        "device_kind": e.device_kind,
        "jax_version": e.jax_version,
        "jaxlib_version": e.jaxlib_version,
        "stored_size": e.stored_size,
        "last_used": e.last_used,
    }


# -- stats ----------------------------------------------------------------------------------


def _ratio(a: float, b: float) -> float | None:
    return a / b if b else None


def _stats_data(store: Store, directory: Path, limit: int, top: int) -> dict[str, Any]:
    st = dict(store.stats())
    entries = list(store.entries())
    groups: dict[tuple[str, str], dict[str, Any]] = {}
    functions: dict[str, dict[str, Any]] = {}
    for e in entries:
        g = groups.setdefault(
            (e.backend or "", e.device_kind or ""),
            {
                "backend": e.backend or "",
                "device_kind": e.device_kind or "",
                "entries": 0,
                "stored_bytes": 0,
                "raw_bytes": 0,
                "hits": 0,
            },
        )
        g["entries"] += 1
        g["stored_bytes"] += e.stored_size
        g["raw_bytes"] += e.raw_size
        g["hits"] += e.hits or 0
        name = e.function_name or "?"
        f = functions.setdefault(
            name,
            {
                "function_name": name,
                "entries": 0,
                "hits": 0,
                "compile_seconds": 0.0,
                "compile_seconds_saved": 0.0,
            },
        )
        f["entries"] += 1
        f["hits"] += e.hits or 0
        f["compile_seconds"] += e.compile_seconds or 0.0
        f["compile_seconds_saved"] += _saved(e)
    hits, misses = int(st.get("hits", 0)), int(st.get("misses", 0))
    known = {"entries", "raw_bytes", "stored_bytes", "file_bytes", "disk_bytes", "max_bytes"}
    known |= {"hits", "misses", "evictions", "puts"}
    counters = {
        k: v
        for k, v in st.items()
        if k not in known and isinstance(v, (int, float)) and not isinstance(v, bool)
    }
    reasons = {}
    for prefix in (_BYPASS, _NONPERSISTENT):
        found = {k[len(prefix) :]: v for k, v in counters.items() if k.startswith(prefix)}
        reasons[prefix] = [
            {"reason": r, "count": n}
            for r, n in sorted(found.items(), key=lambda kv: (-kv[1], kv[0]))[:top]
        ]
    counters = {k: v for k, v in counters.items() if not k.startswith((_BYPASS, _NONPERSISTENT))}
    remote: dict[str, Any] = {name: counters.pop(f"remote_{name}", 0) for name in _REMOTE_COUNTERS}
    remote["state"] = _remote_state(directory)
    fn_rows = list(functions.values())
    return {
        "directory": str(directory),
        "entries": int(st["entries"]),
        "raw_bytes": int(st["raw_bytes"]),
        "stored_bytes": int(st["stored_bytes"]),
        "compression_ratio": _ratio(st["raw_bytes"], st["stored_bytes"]),
        "disk_bytes": int(st["disk_bytes"]),
        "max_bytes": limit,
        "disk_fraction": _ratio(st["disk_bytes"], limit),
        "hits": hits,
        "misses": misses,
        "hit_rate": _ratio(hits, hits + misses),
        "puts": int(st.get("puts", 0)),
        "evictions": int(st.get("evictions", 0)),
        "compile_seconds_saved": sum(f["compile_seconds_saved"] for f in fn_rows),
        "counters": counters,
        "by_device": sorted(groups.values(), key=lambda g: (-g["entries"], g["backend"])),
        "top_by_hits": sorted(fn_rows, key=lambda f: (-f["hits"], f["function_name"]))[:top],
        "top_by_compile_seconds_saved": sorted(
            fn_rows, key=lambda f: (-f["compile_seconds_saved"], f["function_name"])
        )[:top],
        "working_sets": [
            {"name": name, "keys": n, "updated": updated}
            for name, n, updated in store.key_sets()[:top]
        ],
        "bypass_reasons": reasons[_BYPASS],
        "nonpersistent_reasons": reasons[_NONPERSISTENT],
        "tiers": {
            "local": {"hits": hits, "misses": misses},
            "remote": remote,
        },
    }


#: The remote tier's persisted counters (pcache._cache.Runtime bumps them).
_REMOTE_COUNTERS = ("hits", "misses", "bytes_read", "bytes_written", "writes", "errors")
_REMOTE_COUNTERS += ("uploads", "breaker_opens", "recoveries", "slow_skips")


def _remote_state(directory: Path) -> dict[str, Any] | None:
    """The last change of the remote tier's state a process of ``directory`` saw
    (`pcache._remote.STATE_FILE`): on, off, open (failing, retried after a pause),
    slow (skipped), read-only; None if none was ever recorded."""
    from pcache._remote import STATE_FILE

    try:
        with open(directory / STATE_FILE, "rb") as f:
            data = json.loads(f.read(1 << 16))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("state"), str):
        return None
    out: dict[str, Any] = {
        "state": str(data["state"])[:20],
        "reason": str(data.get("reason", ""))[:500],
        "url": str(data.get("url", ""))[:500],
    }
    for name in ("pid", "time", "failures", "retry_in", "slow_for", "round_trip_ms"):
        v = data.get(name)
        if isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0:
            out[name] = v
    return out


# Persisted counters naming why programs were not cached (pcache._cache.Runtime.bypass
# and .nonpersistent write them).
_BYPASS, _NONPERSISTENT = "bypass:", "nonpersistent:"


@cli.command()
@max_size_option("Size limit to report disk usage against.")
@click.option(
    "--top",
    type=click.IntRange(min=0),
    default=5,
    show_default=True,
    help="How many functions to list.",
)
@json_option
@click.pass_context
def stats(ctx: click.Context, max_size: int | None, top: int, as_json: bool) -> None:
    """Show entries, sizes, hit rate and the functions that save the most time.

    Hits and misses are the counters persisted in the store by every process that
    used it; "saved" is hits x compile seconds, summed per function.

    \b
    Examples:
        pcache stats
        pcache stats --json | jq .hit_rate
    """
    limit = _limit(max_size)
    directory = ctx.find_object(_State).resolve()
    with _open_store(ctx) as store:
        data = _stats_data(store, directory, limit, top)
    if as_json:
        _echo_json(data)
        return

    def pct(x: float | None) -> str:
        return "-" if x is None else f"{100 * x:.1f}%"

    ratio = data["compression_ratio"]
    lines = [
        ("Cache directory", data["directory"]),
        ("Entries", str(data["entries"])),
        (
            "Stored size",
            f"{format_size(data['stored_bytes'])} (raw {format_size(data['raw_bytes'])}, "
            + ("compression -)" if ratio is None else f"compression {ratio:.2f}x)"),
        ),
        (
            "Disk usage",
            f"{format_size(data['disk_bytes'])} of {_size(limit)} ({pct(data['disk_fraction'])})",
        ),
        (
            "Hits / misses",
            f"{data['hits']} / {data['misses']} (hit rate {pct(data['hit_rate'])})",
        ),
        ("Puts / evictions", f"{data['puts']} / {data['evictions']}"),
        ("Compile time saved", f"{_seconds(data['compile_seconds_saved'])} (hits x compile time)"),
    ]
    lines += [_counter_line(k, v) for k, v in data["counters"].items()]
    rem = data["tiers"]["remote"]
    if any(rem[k] for k in _REMOTE_COUNTERS):
        lines.append(
            (
                "Remote tier",
                f"{rem['hits']:g} hits / {rem['misses']:g} misses, "
                f"{format_size(rem['bytes_read'])} read, {rem['writes']:g} writes "
                f"({format_size(rem['bytes_written'])}), {rem['uploads']:g} uploads, "
                f"{rem['errors']:g} errors",
            )
        )
        if rem["breaker_opens"] or rem["slow_skips"]:
            lines.append(
                (
                    "Remote recovery",
                    f"off {rem['breaker_opens']:g} times (failing), back {rem['recoveries']:g} "
                    f"times, skipped {rem['slow_skips']:g} times (too slow)",
                )
            )
    if rem["state"] is not None:
        st = rem["state"]
        when = _ago(st["time"], time.time()) if "time" in st else "?"
        why = "".join(c if c.isprintable() else "?" for c in st["reason"])
        lines.append(
            (
                "Remote state",
                f"{st['state']}"
                + (f" ({why})" if why else "")
                + f", last changed {when}"
                + (f" by pid {st['pid']}" if "pid" in st else ""),
            )
        )
    width = max(len(k) for k, _ in lines)
    for k, v in lines:
        click.echo(f"{k.ljust(width)}  {v}")
    if data["by_device"]:
        click.echo("\nBy backend / device kind:")
        rows = [
            [
                f"{g['backend'] or '?'}/{g['device_kind'] or '?'}",
                str(g["entries"]),
                format_size(g["stored_bytes"]),
                str(g["hits"]),
            ]
            for g in data["by_device"]
        ]
        _echo_indented(_table(["BACKEND/DEVICE", "ENTRIES", "STORED", "HITS"], rows, {1, 2, 3}))
    for title, key in (
        ("Top functions by hits:", "top_by_hits"),
        ("Top functions by compile time saved:", "top_by_compile_seconds_saved"),
    ):
        if not data[key]:
            continue
        click.echo(f"\n{title}")
        rows = [
            [
                f["function_name"],
                str(f["entries"]),
                str(f["hits"]),
                _seconds(f["compile_seconds"]),
                _seconds(f["compile_seconds_saved"]),
            ]
            for f in data[key]
        ]
        _echo_indented(
            _table(["FUNCTION", "ENTRIES", "HITS", "COMPILE", "SAVED"], rows, {1, 2, 3, 4})
        )
    for title, key in (
        ("Never cached (compiled every call), by reason:", "bypass_reasons"),
        ("Cached in memory only (never stored), by reason:", "nonpersistent_reasons"),
    ):
        if data[key]:
            click.echo(f"\n{title}")
            rows = [[r["reason"], f"{r['count']:g}"] for r in data[key]]
            _echo_indented(_table(["REASON", "COUNT"], rows, {1}))
    if data["working_sets"]:
        click.echo("\nWorking sets (what each program's next run preloads), most recent first:")
        now = time.time()
        rows = [[w["name"], str(w["keys"]), _ago(w["updated"], now)] for w in data["working_sets"]]
        _echo_indented(_table(["PROGRAM", "KEYS", "SAVED"], rows, {1}))


_COUNTER_LABELS = {
    "seconds_saved": "Time saved (measured)",
    "disk_hits": "Disk hits",
    "corrupt": "Corrupt entries dropped",
}


def _counter_line(name: str, value: float) -> tuple[str, str]:
    label = _COUNTER_LABELS.get(name, name.replace("_", " ").capitalize())
    if "seconds" in name:
        return label, _seconds(value)
    if "bytes" in name:
        return label, format_size(value)
    return label, f"{value:g}"


def _echo_indented(text: str) -> None:
    for line in text.split("\n"):
        click.echo(f"  {line}")


# -- ls ---------------------------------------------------------------------------------------

# field -> (sort key, descending?).  Sizes, times and counts sort biggest/newest first.
SORT_FIELDS: dict[str, tuple[Callable[[Any], Any], bool]] = {
    "last_used": (lambda e: e.last_used or 0.0, True),
    "created": (lambda e: e.created or 0.0, True),
    "size": (lambda e: e.stored_size, True),
    "raw_size": (lambda e: e.raw_size, True),
    "compile_seconds": (lambda e: e.compile_seconds or 0.0, True),
    "hits": (lambda e: e.hits or 0, True),
    "saved": (_saved, True),
    "function": (lambda e: e.function_name or "", False),
    "backend": (lambda e: (e.backend or "", e.device_kind or ""), False),
    "key": (lambda e: e.key, False),
}


def _ls_row(e: Any) -> dict[str, Any]:
    """An entry as ``--json`` prints it: Entry.to_dict(), schemas/entry.schema.json."""
    return e.to_dict()


@cli.command(name="ls")
@click.option(
    "--sort",
    "sort_field",
    type=click.Choice(list(SORT_FIELDS)),
    default="last_used",
    show_default=True,
    help="Order rows by this field (numbers and times: largest/newest first).",
)
@click.option("--limit", type=click.IntRange(min=0), help="Show at most N rows.")
@json_option
@click.pass_context
def ls_(ctx: click.Context, sort_field: str, limit: int | None, as_json: bool) -> None:
    """List entries: key, function, backend/device, size, compile time, hits, last use.

    \b
    Examples:
        pcache ls --sort hits --limit 10
        pcache ls --json | jq '.[].function_name'
    """
    key, descending = SORT_FIELDS[sort_field]
    with _open_store(ctx) as store:
        entries = sorted(store.entries(), key=key, reverse=descending)
    if limit is not None:
        entries = entries[:limit]
    if as_json:
        _echo_json([_ls_row(e) for e in entries])
        return
    if not entries:
        click.echo("No entries.", err=True)
        return
    now = time.time()
    rows = [
        [
            e.key[:12],
            e.function_name or "?",
            _device(e),
            format_size(e.stored_size),
            _seconds(e.compile_seconds),
            str(e.hits or 0),
            _ago(e.last_used, now),
        ]
        for e in entries
    ]
    click.echo(
        _table(
            ["KEY", "FUNCTION", "BACKEND/DEVICE", "SIZE", "COMPILE", "HITS", "LAST USED"],
            rows,
            {3, 4, 5},
        )
    )


# -- clear --------------------------------------------------------------------------------------


@cli.command()
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@click.pass_context
def clear(ctx: click.Context, yes: bool) -> None:
    """Remove every entry (like ccache -C).

    Asks first unless --yes; with nothing to answer on stdin it refuses.
    """
    directory = ctx.find_object(_State).resolve()
    with _open_store(ctx) as store:
        st = store.stats()
        if not yes:
            n = st["entries"]
            prompt = (
                f"Remove {'the 1 entry' if n == 1 else f'all {n} entries'} "
                f"({format_size(st['stored_bytes'])}) from {directory}?"
            )
            try:
                confirmed = click.confirm(prompt, default=False, err=True)
            except click.Abort:  # end of input: nobody there to say yes
                raise click.ClickException("not cleared: no answer on stdin; pass --yes") from None
            if not confirmed:
                raise click.ClickException("not cleared")
        with _store_errors():
            n = store.clear()
    click.echo(f"Removed {n} {'entry' if n == 1 else 'entries'} from {directory}.")


# -- verify -------------------------------------------------------------------------------------


@cli.command()
@click.option(
    "--fix",
    is_flag=True,
    help="Remove the entries that fail; replace a damaged database or secret.",
)
@click.pass_context
def verify(ctx: click.Context, fix: bool) -> None:
    """Check the cache directory, the store's integrity, and every entry.

    \b
    Checked: who may write the directory; secret.key; the database (SQLite's
    integrity check); each entry's metadata, its signed head (HMAC: forged or
    edited rows, sizes that were never signed), its bytes against their checksum;
    missing values and orphan files.

    Exit status 1 when problems are found and not fixed.
    """
    directory = ctx.find_object(_State).resolve()
    problems, fixed_notes, signer = _verify_directory(directory, fix)
    replaced: list[str] = []

    def report(message: str, category: type[Warning], cause: str) -> None:
        if cause == "database":
            replaced.append(message)

    with _open_store(ctx, repair=fix, report=report) as store:
        if fix and store.read_only:
            problems.append(f"read-only: {store.read_only_reason}; nothing can be fixed")
            fix = False
        admit = None
        if signer is not None:

            def admit(e: Any) -> None:
                signer.admit(e.key, e.raw_size, e.extra)

        with _Progress("Verifying") as progress:
            result = store.verify(fix=fix, progress=progress, admit=admit)
    fixed_notes += [f"fixed: {m.split(': ', 1)[-1]}" for m in replaced]
    notes = [n for n in fixed_notes if n.startswith("note:")]
    fixed_notes = [n for n in fixed_notes if not n.startswith("note:")]
    for note in notes:
        click.echo(note)
    if result.replaced:
        fixed_notes.append(
            "fixed: the database failed its integrity check; moved it aside "
            "(store.db.damaged-*) and started an empty one"
        )
    problems += _verify_problems(result)
    noun = "entry" if result.checked == 1 else "entries"
    if not problems and not fixed_notes:
        click.echo(f"OK: {result.checked} {noun} verified, every checksum matches.")
        return
    for p in problems:
        click.echo(p)
    for note in fixed_notes:
        click.echo(note)
    count = f"{len(problems)} {'problem' if len(problems) == 1 else 'problems'}"
    if fix:
        click.echo(f"{count} in {result.checked} {noun}; fixed ({result.fixed} removed).")
        if any(p.startswith(_UNFIXABLE) for p in problems):
            ctx.exit(1)
        return
    if not problems:
        return
    click.echo(f"{count} in {result.checked} {noun}; run 'pcache verify --fix' to repair them.")
    ctx.exit(1)


# Problems that --fix leaves for the user: they are about who may write the
# directory, or the directory cannot be written at all.
_UNFIXABLE = ("unsafe:", "read-only:", "secret:")


def _verify_directory(directory: Path, fix: bool) -> tuple[list[str], list[str], Any]:
    """Checks of a pcache directory beyond its store: who may write it, and its
    secret (``None`` for a bare store directory).  Returns ``(problems, fixed,
    signer)``; ``signer`` checks entry heads, when the secret could be read."""
    from pcache._errors import PcacheError
    from pcache._signing import MIN_SECRET_BYTES, Signer, load_secret

    problems: list[str] = []
    fixed: list[str] = []
    layout = Layout(directory)
    if not layout.store.is_dir():
        return problems, fixed, None
    why = untrusted_reasons(directory)
    if why:
        problems.append(
            f"unsafe: {directory} is {' and '.join(why)}; whoever may write it can delete "
            "or fill the cache (entries are signed, so not plant programs)"
        )
    path = layout.secret
    try:
        return problems, fixed, Signer(load_secret(path, create=False), path)
    except FileNotFoundError:  # a bare store, or a cache pcache never signed in
        fixed.append(f"note: no {path.name}: entries' signatures are not checked")
    except PcacheError as exc:
        size = path.stat().st_size if path.is_file() else None
        if fix and size is not None and size < MIN_SECRET_BYTES:
            # Nothing was ever signed with it (pcache refuses to): safe to replace.
            signer = Signer(load_secret(path), path)
            fixed.append(f"fixed: {path.name} was truncated ({size} bytes); made a new one")
            return problems, fixed, signer
        problems.append(f"secret: {exc}; entries' signatures are not checked")
    except OSError as exc:
        problems.append(f"secret: {path}: {exc}; entries' signatures are not checked")
    return problems, fixed, None


def _verify_problems(result: Any) -> list[str]:
    def why(key: str) -> str:
        reason = result.reasons.get(key)
        return f" ({reason})" if reason else ""

    return (
        [f"integrity: {line}" for line in result.integrity]
        + [f"corrupt: {key}{why(key)}" for key in result.corrupt]
        + [f"missing value: {key}{why(key)}" for key in result.missing]
        + [f"orphan file: values/{name}" for name in result.orphans]
    )


# -- explain -------------------------------------------------------------------------------------

_HEX_PREFIX = re.compile(r"^[0-9a-f]{6,64}$")


def _find_entry(store: Store, prefix: str) -> Any:
    if len(prefix) == 64:
        entry = store.entry(prefix)
        matches = [entry] if entry is not None else []
    else:
        matches = [e for e in store.entries() if e.key.startswith(prefix)]
    if not matches:
        raise click.ClickException(f"no entry with key {prefix}")
    if len(matches) > 1:
        shown = "\n".join(f"  {e.key}  {e.function_name or '?'}" for e in matches[:20])
        more = f"\n  ... and {len(matches) - 20} more" if len(matches) > 20 else ""
        raise click.ClickException(
            f"key prefix {prefix} is ambiguous; it matches {len(matches)} entries:\n{shown}{more}"
        )
    return matches[0]


@cli.command()
@click.argument("key")
@json_option
@click.pass_context
def explain(ctx: click.Context, key: str, as_json: bool) -> None:
    """Show one entry's metadata and the named parts of its key.

    KEY is the full 64-hex key or a unique prefix of at least 6 hex digits (as 'ls'
    shows).  Comparing the key parts of two entries for the same function tells
    which input (jaxpr, shapes, flags, versions...) made them differ.
    """
    prefix = key.strip().lower()
    if not _HEX_PREFIX.match(prefix):
        raise click.BadParameter(
            f"{key!r} is not a key: expected 6 to 64 hex digits", param_hint="KEY"
        )
    with _open_store(ctx) as store:
        entry = _find_entry(store, prefix)
    if as_json:
        _echo_json(_ls_row(entry))
        return
    now = time.time()
    extra = dict(entry.extra or {})
    parts = extra.pop("key_parts", None) or []
    fields = [
        ("key", entry.key),
        ("function", entry.function_name or "?"),
        ("backend", entry.backend or "?"),
        ("device kind", entry.device_kind or "?"),
        ("jax", entry.jax_version or "?"),
        ("jaxlib", entry.jaxlib_version or "?"),
        ("size", f"{format_size(entry.stored_size)} stored, {format_size(entry.raw_size)} raw"),
        ("codec", f"{entry.codec}, checksum {entry.checksum}"),
        ("compile time", _seconds(entry.compile_seconds)),
        ("hits", str(entry.hits or 0)),
        ("saved", _seconds(_saved(entry))),
        ("created", f"{_timestamp(entry.created)} ({_ago(entry.created, now)})"),
        ("last used", f"{_timestamp(entry.last_used)} ({_ago(entry.last_used, now)})"),
    ]
    fields += [
        (k.replace("_", " "), v if isinstance(v, str) else json.dumps(v))
        for k, v in sorted(extra.items())
    ]
    width = max(len(k) for k, _ in fields)
    for k, v in fields:
        click.echo(f"{k.ljust(width)}  {v}")
    click.echo(f"key parts ({len(parts)}):")
    if parts:
        name_width = max(len(str(p[0])) for p in parts)
        for name, digest in parts:
            click.echo(f"  {str(name).ljust(name_width)}  {digest}")


# -- env ------------------------------------------------------------------------------------------


# -- bundles: export / import ------------------------------------------------------------


def _progress(enabled: bool) -> Callable | None:
    """Progress on stderr, at most twice a second (entries and bytes)."""
    if not enabled:
        return None
    last = [0.0]

    def report(phase: str, done: int, total: int, nbytes: int, total_bytes: int) -> None:
        now = time.monotonic()
        if now - last[0] < 0.5 and done < total:
            return
        last[0] = now
        click.echo(
            f"\r{phase}: {done}/{total} entries, {_size(nbytes)} of {_size(total_bytes)}",
            err=True,
            nl=done >= total,
        )

    return report


def _key_file(path: Path | None) -> bytes | None:
    from pcache._bundle import BundleError, read_key

    if path is None:
        return None
    try:
        return read_key(path)
    except BundleError as exc:
        raise click.ClickException(str(exc)) from None


@cli.command(name="export")
@click.argument("bundle", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--working-set",
    "working_sets",
    multiple=True,
    metavar="PROGRAM",
    help="Entries a program used (its working sets whose name contains PROGRAM), "
    "with their order, so an importing run preloads them. Repeatable.",
)
@click.option(
    "--function", "functions", multiple=True, help="Entries whose function name contains this."
)
@click.option(
    "--backend", "backends", multiple=True, help="Entries for this backend (cpu, cuda, ...)."
)
@click.option("--since", type=AGE, help=f"Entries used within AGE ({AGE_FORMS}).")
@click.option("--all", "everything", is_flag=True, help="Every entry (the default with no filter).")
@click.option(
    "--sign-key",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Sign the bundle with this key file (owner-only; 16 bytes or more), for "
    "'pcache import --verify-key'.",
)
@click.option("--progress/--no-progress", default=None, help="Progress on stderr (default: a tty).")
@json_option
@click.pass_context
def export_(
    ctx: click.Context,
    bundle: Path,
    working_sets: tuple[str, ...],
    functions: tuple[str, ...],
    backends: tuple[str, ...],
    since: float | None,
    everything: bool,
    sign_key: Path | None,
    progress: bool | None,
    as_json: bool,
) -> None:
    """Write entries of the cache into the file BUNDLE, for 'pcache import' elsewhere.

    Filters combine: an entry is exported if it is in a selected working set, or
    matches every other filter given. Each entry is checked with this directory's
    secret first (one that fails is left out and counted; so is one evicted by
    another process between the listing and its reading).
    """
    from pcache import _bundle

    key = _key_file(sign_key)
    directory = ctx.find_object(_State).resolve()
    with _open_store(ctx):  # the usual errors for a missing or damaged directory
        pass
    with _store_errors():
        try:
            result = _bundle.export_dir(
                directory,
                bundle,
                working_sets=working_sets,
                functions=functions,
                backends=backends,
                since=since,
                everything=everything,
                sign_key=key,
                progress=_progress(sys.stderr.isatty() if progress is None else progress),
            )
        except _bundle.BundleError as exc:
            raise click.ClickException(str(exc)) from None
        except OSError as exc:
            raise click.ClickException(f"cannot write {bundle}: {exc}") from exc
        except StoreError:
            raise
        except Exception as exc:  # noqa: BLE001 - one line, never a traceback
            raise click.ClickException(
                f"export to {bundle} failed ({type(exc).__name__}: {exc})"
            ) from exc
    if as_json:
        _echo_json(result.to_json())
        return
    click.echo(
        f"Exported {result.entries} entries ({_size(result.raw_bytes)}) and "
        f"{result.working_sets} working sets to {bundle} ({_size(result.bundle_bytes)}"
        + (", signed" if result.signed else "")
        + ")"
    )
    if result.unreadable:
        click.echo(f"Left out {result.unreadable} entries that failed their checks here.")
    if result.evicted:
        click.echo(
            f"Left out {result.evicted} entries evicted (by another process) after they "
            "were listed; nothing was wrong with them."
        )
    if result.not_carried:
        click.echo(f"Left out {result.not_carried} entries whose metadata a bundle cannot carry.")


@cli.command(name="import")
@click.argument("bundle", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--verify-key",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Accept the bundle only if it was signed with this key file ('export --sign-key').",
)
@click.option(
    "--trust-unsigned",
    is_flag=True,
    help="Import a bundle without a signature checked by --verify-key: trust whoever "
    "could have written the file to have put the right executable under each key.",
)
@click.option(
    "--device-check/--no-device-check",
    default=True,
    help="Skip entries for backends and device kinds this machine lacks (asks JAX; "
    "default). Without it only the jax and jaxlib versions are checked.",
)
@max_size_option("Import no more than this much in all (default: the cache's limit).")
@click.option("--progress/--no-progress", default=None, help="Progress on stderr (default: a tty).")
@json_option
@click.pass_context
def import_(
    ctx: click.Context,
    bundle: Path,
    verify_key: Path | None,
    trust_unsigned: bool,
    device_check: bool,
    max_size: int | None,
    progress: bool | None,
    as_json: bool,
) -> None:
    """Store the entries of BUNDLE in this cache, signed with its secret.

    Importing is a trust decision: an entry is a compiled program, and loading one
    can run anything. Import only bundles you would run: --verify-key accepts only
    those signed with a key you hold; a bundle without such a signature needs
    --trust-unsigned (nothing else vouches that each executable is the program it
    is stored for). The bundle is checked whole (every record and digest) before
    anything is stored, and a bad one stores nothing; entries for another JAX,
    backend or device kind are skipped and counted. Importing again changes nothing.
    """
    from pcache import _bundle

    key = _key_file(verify_key)
    directory = ctx.find_object(_State).resolve()
    with _store_errors():
        try:
            result = _bundle.import_dir(
                directory,
                bundle,
                lambda: _bundle.probe_machine(device_check),
                verify_key=key,
                trust_unsigned=trust_unsigned,
                max_bytes=_limit(max_size),
                progress=_progress(sys.stderr.isatty() if progress is None else progress),
            )
        except _bundle.BundleError as exc:
            raise click.ClickException(f"{exc}; nothing was imported") from None
        except OSError as exc:
            raise click.ClickException(f"cannot import into {directory}: {exc}") from exc
        except StoreError:
            raise
        except Exception as exc:  # noqa: BLE001 - one line, never a traceback
            raise click.ClickException(
                f"import of {bundle} failed ({type(exc).__name__}: {exc}); nothing was imported"
            ) from exc
    if as_json:
        _echo_json(result.to_json())
        return
    click.echo(
        f"Imported {result.imported} of {result.entries} entries "
        f"({_size(result.bytes_imported)}) into {directory}"
        + (f"; {result.present} were here already" if result.present else "")
        + (f"; {result.working_sets} working sets" if result.working_sets else "")
    )
    for reason, n in sorted(result.skipped.items()):
        click.echo(f"Skipped {n}: {reason}")


# -- remote ---------------------------------------------------------------------------------


@cli.group()
@click.option(
    "--url",
    envvar="JAX_PCACHE_REMOTE",
    help="The remote tier: redis://host:port/db, rediss://... or unix:///path?db=0 "
    "[default: $JAX_PCACHE_REMOTE]",
)
@click.pass_context
def remote(ctx: click.Context, url: str | None) -> None:
    """The remote tier a fleet shares (Redis or Valkey): ping, stats, gc, push.

    \b
    Examples:
        pcache remote --url redis://cache:6379/0 ping
        pcache remote stats --json
        pcache remote gc --older-than 14d --other-formats
        pcache remote push    # a new remote, filled from this host's warm store
    """
    if not url:
        raise click.UsageError("no remote: pass --url or set JAX_PCACHE_REMOTE")
    ctx.obj = (ctx.find_object(_State), url)


@contextlib.contextmanager
def _remote_client(ctx: click.Context) -> Iterator[Any]:
    from pcache import _remote

    _, url = ctx.obj
    try:
        timeout = _settings_remote_timeout()
        client = _remote.connect(url, timeout)
    except (_remote.RemoteError, ValueError) as exc:
        raise click.UsageError(str(exc)) from None
    try:
        yield client
    except Exception as exc:
        import redis

        if isinstance(exc, (redis.RedisError, OSError)):
            raise click.ClickException(
                f"remote {_remote.redact(url)}: {type(exc).__name__}: {exc}"
            ) from None
        raise
    finally:
        client.close()


def _settings_remote_timeout() -> float:
    from pcache._remote import DEFAULT_TIMEOUT

    raw = os.environ.get("JAX_PCACHE_REMOTE_TIMEOUT")
    try:
        return parse_age(raw) if raw else DEFAULT_TIMEOUT
    except ConfigError as exc:
        raise click.UsageError(f"JAX_PCACHE_REMOTE_TIMEOUT: {exc}") from None


@remote.command()
@json_option
@click.pass_context
def ping(ctx: click.Context, as_json: bool) -> None:
    """Check that the remote answers; print its round trip and version."""
    from pcache._remote import redact

    with _remote_client(ctx) as client:
        t0 = time.perf_counter()
        client.ping()
        rtt = time.perf_counter() - t0
        version = client.info("server").get("redis_version", "?")
    data = {"url": redact(ctx.obj[1]), "round_trip_seconds": rtt, "server_version": version}
    if as_json:
        _echo_json(data)
    else:
        click.echo(f"{data['url']}: PONG in {rtt * 1000:.2f} ms (server {version})")


@remote.command(name="stats")
@click.option("--namespace", help="Only this namespace [default: every one].")
@json_option
@click.pass_context
def remote_stats(ctx: click.Context, namespace: str | None, as_json: bool) -> None:
    """What the remote holds, by namespace, format and host class."""
    from pcache import _remote

    with _remote_client(ctx) as client:
        data = _remote.inventory(client, namespace)
    data["url"] = _remote.redact(ctx.obj[1])
    if as_json:
        _echo_json(data)
        return
    srv = data["server"]
    limit = format_size(srv["maxmemory"]) if srv["maxmemory"] else "no limit"
    click.echo(f"Remote   {data['url']}")
    click.echo(
        f"Memory   {format_size(srv['used_memory'])} of {limit} "
        f"(policy {srv['maxmemory_policy']}, {srv['evicted_keys']} keys evicted)"
    )
    if not data["groups"]:
        click.echo("No pcache entries.")
        return
    rows = [
        [
            g["namespace"],
            g["format"] + ("" if g["current_format"] else " (old)"),
            g["host_class"],
            str(g["entries"]),
            str(g["chunks"]),
            str(g["leases"]),
            format_size(g["bytes"]),
        ]
        for g in data["groups"]
    ]
    click.echo(
        _table(
            ["NAMESPACE", "FORMAT", "HOST CLASS", "ENTRIES", "CHUNKS", "LEASES", "BYTES"],
            rows,
            {3, 4, 5, 6},
        )
    )


@remote.command(name="gc")
@click.option("--namespace", help="Only this namespace [default: every one].")
@click.option("--older-than", type=AGE, help=f"Remove entries nobody read for AGE ({AGE_FORMS}).")
@click.option(
    "--other-formats", is_flag=True, help="Remove every key of another pcache format version."
)
@click.option("--all", "everything", is_flag=True, help="Remove every entry (of --namespace).")
@click.option("--dry-run", is_flag=True, help="Show what would be removed; change nothing.")
@json_option
@click.pass_context
def remote_gc(
    ctx: click.Context,
    namespace: str | None,
    older_than: float | None,
    other_formats: bool,
    everything: bool,
    dry_run: bool,
    as_json: bool,
) -> None:
    """Remove old entries, other formats' keys and orphaned chunks from the remote.

    Chunks whose entry is gone (a writer that died mid-write) are removed once
    they are an hour old. Leases are never touched: they expire by themselves.
    """
    from pcache import _remote

    with _remote_client(ctx) as client:
        result = _remote.gc(
            client,
            namespace=namespace,
            older_than=older_than,
            other_formats=other_formats,
            everything=everything,
            dry_run=dry_run,
        )
    if as_json:
        _echo_json(result)
        return
    if result["idle_unknown"]:
        click.echo(
            f"{result['idle_unknown']} entries kept: the server does not track idle times "
            "(an LFU maxmemory-policy); --older-than needs an LRU or noeviction policy",
            err=True,
        )
    verb = "Would remove" if dry_run else "Removed"
    click.echo(
        f"{verb} {result['entries_removed']} entries and {result['chunks_removed']} chunks "
        f"({format_size(result['bytes_removed'])}); {result['entries_kept']} entries kept"
    )


@remote.command()
@click.option(
    "--namespace",
    help="The fleet's namespace [default: $JAX_PCACHE_REMOTE_NAMESPACE, else default].",
)
@click.option("--dry-run", is_flag=True, help="Count what would be pushed; write nothing.")
@json_option
@click.pass_context
def push(ctx: click.Context, namespace: str | None, dry_run: bool, as_json: bool) -> None:
    """Fill the remote from this host's local store (--dir): every entry it lacks.

    Each entry is checked with the local directory's secret and signed with the
    fleet key ($JAX_PCACHE_REMOTE_SECRET_FILE); it is shared with the hosts of
    this host's class (CPU). For a new or flushed remote, from a warm host.
    """
    from pcache._cache import Runtime

    directory = ctx.find_object(_State).resolve()
    with _open_store(ctx) as store:  # the errors of a missing or damaged store
        keys = [e.key for e in store.entries()]
    try:
        settings = Settings.resolve(
            directory, remote=ctx.obj[1], remote_namespace=namespace, preload=0
        )
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from None
    rt = Runtime(settings)
    try:
        rem = rt.remote
        if rem is None:
            raise click.ClickException(f"remote tier off: {rt.remote_off_reason}")
        if not rem.writable:
            raise click.ClickException(f"remote {rem.url} is {rem.state}: {rem.state_reason}")
        counts = {"pushed": 0, "present": 0, "skipped": 0, "bytes_written": 0}
        for key in keys:
            there = rem.exists(key)
            if there is None:
                raise click.ClickException(f"remote {rem.url}: {rem.state_reason}")
            if there:
                counts["present"] += 1
            elif dry_run:
                counts["pushed"] += 1
            else:
                n = rt.upload(key)
                if n is None and not rem.writable:
                    raise click.ClickException(f"remote {rem.url}: {rem.state_reason}")
                if n:
                    counts["pushed"] += 1
                    counts["bytes_written"] += n
                elif n == 0:
                    counts["present"] += 1
                else:  # another entry format, or not this directory's secret
                    counts["skipped"] += 1
        data = {
            "url": rem.url,
            "namespace": rem.config.namespace,
            "prefix": rem.prefix,
            **counts,
            "dry_run": dry_run,
        }
    finally:
        rt.close()
    if as_json:
        _echo_json(data)
        return
    verb = "Would push" if dry_run else "Pushed"
    click.echo(
        f"{verb} {data['pushed']} entries ({format_size(data['bytes_written'])}) to "
        f"{data['url']} namespace {data['namespace']}; {data['present']} were there"
        + (
            f"; {data['skipped']} skipped (another format, or not signed here)"
            if data["skipped"]
            else ""
        )
    )


@cli.command()
def env() -> None:
    """List the JAX_PCACHE_* environment variables, what they do and their values."""
    from pcache._remote import redact

    for name, doc in ENV_VARS.items():
        value = os.environ.get(name)
        if name == "JAX_PCACHE_REMOTE" and value:
            value = redact(value)
        click.echo(f"{name}={value}" if value is not None else f"{name} (unset)")
        click.echo(f"    {doc}")
    click.echo(f"Cache directory now: {default_cache_dir()}")


def main() -> None:
    cli(prog_name="pcache")


if __name__ == "__main__":
    main()
