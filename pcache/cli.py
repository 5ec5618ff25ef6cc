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

This module holds the group and the bundle commands (export, import); the others
are in ``_cli_inspect`` (stats, ls, explain), ``_cli_maintain`` (gc, clear,
verify) and ``_cli_remote`` (remote, env), what they share in ``_cli_common``.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

import click

from pcache._cli_common import (
    _EPILOG,
    AGE,
    CONTEXT_SETTINGS,
    _echo_json,
    _limit,
    _open_store,
    _size,
    _State,
    _store_errors,
    json_option,
    max_size_option,
)
from pcache._cli_common import _Progress as _Progress  # (re-exported: tests draw one)
from pcache._cli_inspect import SORT_FIELDS, explain, ls_, stats
from pcache._cli_maintain import clear, gc, verify
from pcache._cli_remote import env, remote
from pcache._config import AGE_FORMS
from pcache.store import StoreError

__all__ = ["SORT_FIELDS", "cli", "main"]

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


for _command in (stats, ls_, gc, verify, clear, explain, env, remote):
    cli.add_command(_command)


def main() -> None:
    cli(prog_name="pcache")


if __name__ == "__main__":
    main()
