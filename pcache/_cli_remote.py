"""``pcache remote ping|stats|gc|push`` (the fleet's remote tier) and ``pcache env``."""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Iterator
from typing import Any

import click

from pcache._cli_common import (
    AGE,
    _echo_json,
    _open_store,
    _State,
    _table,
    json_option,
)
from pcache._config import (
    AGE_FORMS,
    ENV_VARS,
    ConfigError,
    Settings,
    default_cache_dir,
    format_size,
    parse_age,
)
from pcache._host import host_class_of_meta

# -- remote ---------------------------------------------------------------------------------


@click.group()
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


def _push(rt: Any, keys: list[str], dry_run: bool) -> dict[str, Any]:
    """Upload what the remote of ``rt`` lacks of ``keys``; what was done."""
    try:
        rem = rt.remote
        if rem is None:  # what the runtime logged about it is this message, on one line
            raise click.ClickException(f"remote tier off: {rt.remote_off_reason}")
        if not rem.writable:
            raise click.ClickException(f"remote {rem.url} is {rem.state}: {rem.state_reason}")
        counts = {"pushed": 0, "present": 0, "skipped": 0, "bytes_written": 0}
        for key in keys:
            there = rem.exists(key, _class_of(rt, key))
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
    return data


def _class_of(rt: Any, key: str) -> str:
    """The key space the local entry ``key`` goes to (its metadata's host class,
    as `RemoteTier.upload` places it); "" (this host's CPU) if it does not say."""
    try:
        entry = rt.local.store.entry(key)
    except Exception:  # unreadable: the upload that follows reports it
        return ""
    if entry is None:
        return ""
    meta = {"backend": entry.backend, "device_kind": entry.device_kind, "extra": entry.extra}
    return host_class_of_meta(meta) or ""


@contextlib.contextmanager
def _held_logs() -> Iterator[list[logging.LogRecord]]:
    """The records pcache logs while inside, held back instead of printed."""
    held: list[logging.LogRecord] = []

    def hold(record: logging.LogRecord) -> bool:
        held.append(record)
        return False

    log = logging.getLogger("pcache")
    log.addFilter(hold)
    try:
        yield held
    finally:
        log.removeFilter(hold)


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
    # What the runtime logs while it pushes (the remote off, failing) is what the
    # error says: printed only when the push succeeds.
    with _held_logs() as held:
        data = _push(Runtime(settings), keys, dry_run)
    for record in held:
        logging.getLogger("pcache").handle(record)
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


# -- env --------------------------------------------------------------------------------


@click.command()
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
