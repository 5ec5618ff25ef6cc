"""``pcache stats``, ``pcache ls`` and ``pcache explain``: the commands that read a
cache directory."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from pcache._cli_common import (
    _ago,
    _device,
    _echo_indented,
    _echo_json,
    _limit,
    _open_store,
    _saved,
    _seconds,
    _size,
    _State,
    _table,
    _timestamp,
    json_option,
    max_size_option,
)
from pcache._config import format_size
from pcache.store import Store

# -- stats ----------------------------------------------------------------------------------


def _ratio(a: float, b: float) -> float | None:
    return a / b if b else None


def _by_device_and_function(entries: list[Any]) -> tuple[list[dict], list[dict]]:
    """Entries, sizes and hits per backend/device kind; entries, hits and compile
    time (spent, saved) per function name."""
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
    return list(groups.values()), list(functions.values())


def _stats_data(store: Store, directory: Path, limit: int, top: int) -> dict[str, Any]:
    st = dict(store.stats())
    by_device, fn_rows = _by_device_and_function(list(store.entries()))
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
        "by_device": sorted(by_device, key=lambda g: (-g["entries"], g["backend"])),
        "top_by_hits": sorted(fn_rows, key=lambda f: (-f["hits"], f["function_name"]))[:top],
        "top_by_compile_seconds_saved": sorted(
            fn_rows, key=lambda f: (-f["compile_seconds_saved"], f["function_name"])
        )[:top],
        "working_sets": [
            {"name": name, "keys": n, "updated": updated}
            for name, n, updated in store.key_sets()
            if not name.startswith("pcache:")  # (pcache's own hints: `_persist_hints.HINTS`)
        ][:top],
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


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def _summary_lines(data: dict[str, Any], limit: int) -> list[tuple[str, str]]:
    """The ``label  value`` lines at the top of ``pcache stats``."""
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
            f"{format_size(data['disk_bytes'])} of {_size(limit)} ({_pct(data['disk_fraction'])})",
        ),
        (
            "Hits / misses",
            f"{data['hits']} / {data['misses']} (hit rate {_pct(data['hit_rate'])})",
        ),
        ("Puts / evictions", f"{data['puts']} / {data['evictions']}"),
        ("Compile time saved", f"{_seconds(data['compile_seconds_saved'])} (hits x compile time)"),
    ]
    lines += [_counter_line(k, v) for k, v in data["counters"].items()]
    return lines + _remote_lines(data["tiers"]["remote"])


def _remote_lines(rem: dict[str, Any]) -> list[tuple[str, str]]:
    lines: list[tuple[str, str]] = []
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
    return lines


@click.command()
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

    lines = _summary_lines(data, limit)
    width = max(len(k) for k, _ in lines)
    for k, v in lines:
        click.echo(f"{k.ljust(width)}  {v}")
    _echo_tables(data)


def _echo_tables(data: dict[str, Any]) -> None:
    """The tables under the summary of ``pcache stats``."""
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


def entry_kind(e: Any) -> str:
    """``trace`` for a persisted trace (its COMPILE: the seconds it took to trace),
    else ``exe``: an executable."""
    load = e.extra.get("load") if isinstance(e.extra, dict) else None
    return "trace" if isinstance(load, dict) and load.get("kind") == "trace" else "exe"


def _ls_row(e: Any) -> dict[str, Any]:
    """An entry as ``--json`` prints it: Entry.to_dict(), schemas/entry.schema.json."""
    return e.to_dict()


@click.command(name="ls")
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
    """List entries: key, kind, function, backend/device, size, compile time, hits, last use.

    KIND is ``exe`` (an executable) or ``trace`` (a persisted trace, whose COMPILE
    is the seconds it took to trace).

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
            entry_kind(e),
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
            ["KEY", "KIND", "FUNCTION", "BACKEND/DEVICE", "SIZE", "COMPILE", "HITS", "LAST USED"],
            rows,
            {4, 5, 6},
        )
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


@click.command()
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
