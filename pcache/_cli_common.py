"""What every ``pcache`` command shares: option types, opening the store of ``--dir``
with its errors as one-line messages, formatting, progress bars."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import click

from pcache._config import (
    DEFAULT_MAX_DISK,
    ENV_VARS,
    SIZE_FORMS,
    ConfigError,
    Layout,
    Settings,
    format_size,
    parse_age,
    parse_size,
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
    """Turn library errors into a one-line ``ClickException`` (exit 1), with a hint
    of what to do for the common ones."""
    try:
        yield
    except StoreError as exc:
        hint = next((h for cls, h in _HINTS if isinstance(exc, cls)), "")
        raise click.ClickException(
            f"{type(exc).__name__}: {exc}" + (f" ({hint})" if hint else "")
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


def _echo_indented(text: str) -> None:
    for line in text.split("\n"):
        click.echo(f"  {line}")
