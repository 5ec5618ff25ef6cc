"""``pcache gc``, ``pcache clear`` and ``pcache verify``: the commands that change a
cache directory."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from pcache._cli_common import (
    AGE,
    _device,
    _echo_indented,
    _echo_json,
    _limit,
    _open_store,
    _Progress,
    _size,
    _State,
    _store_errors,
    _table,
    json_option,
    max_size_option,
)
from pcache._config import (
    AGE_FORMS,
    Layout,
    format_size,
    untrusted_reasons,
)
from pcache.store import Store

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


@click.command()
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
    _echo_gc(result, removed, after, locks_removed, limit, dry_run)


def _echo_gc(
    result: Any, removed: list[Any], after: dict[str, Any], locks_removed: int, limit: int,
    dry_run: bool,
) -> None:  # fmt: skip
    """What ``pcache gc`` did (or would do), as text."""
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


# -- clear --------------------------------------------------------------------------------------


@click.command()
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
            if not sys.stdin.isatty():  # the answer read was not echoed: end the line
                click.echo(err=True)
            if not confirmed:
                raise click.ClickException("not cleared")
        with _store_errors():
            n = store.clear()
    click.echo(f"Removed {n} {'entry' if n == 1 else 'entries'} from {directory}.")


# -- verify -------------------------------------------------------------------------------------


@click.command()
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
