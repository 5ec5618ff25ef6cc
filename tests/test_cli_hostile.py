"""No traceback from any `pcache` command on any input (issue 26).

Every command the CLI has (listed from the click group itself, so a new one is
covered when it is added) runs in a process of its own against hostile directories
(missing, a file, unreadable, a corrupt or empty or foreign or newer database,
a non-UTF-8 name), hostile arguments (garbage, bad sizes, ages and numbers, non-UTF-8
bytes) and files that are not bundles. Whatever it does, it prints no traceback;
when it fails it exits non-zero with one line on stderr (click's usage errors:
the usage, then one "Error:" line).
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import click
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pcache.store import Store

from pcache.cli import cli


def _commands(group: click.Group = cli, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    out = []
    for name, cmd in sorted(group.commands.items()):
        if isinstance(cmd, click.Group):
            out += _commands(cmd, (*prefix, name))
        else:
            out.append((*prefix, name))
    return out


COMMANDS = _commands()

# Arguments that make each command do its work (and no more: nothing imports JAX,
# nothing waits on a network). {bundle} is a file that is not a bundle.
WORK = {
    ("clear",): ["--yes"],
    ("export",): ["{out}"],
    ("import",): ["{bundle}", "--no-device-check", "--trust-unsigned"],
    ("explain",): ["abcdef"],
    ("gc",): ["--dry-run"],
}
# Commands that never read --dir (run in the test of arguments).
NO_DIRECTORY = {("env",), ("remote", "ping"), ("remote", "stats"), ("remote", "gc")}
# A remote nobody listens on: refused at once.
REMOTE = ["--url", "redis://127.0.0.1:1/0"]


def _argv(command: tuple[str, ...], directory: Path, tmp: Path) -> list[str]:
    args = [
        a.format(out=tmp / "out.pcb", bundle=tmp / "not-a-bundle") for a in WORK.get(command, [])
    ]
    if command[0] == "remote":
        return ["--dir", str(directory), "remote", *REMOTE, *command[1:], *args]
    return ["--dir", str(directory), *command, *args]


def _env(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("JAX_PCACHE_")}
    env["HOME"] = str(tmp / "home")
    env["XDG_CACHE_HOME"] = str(tmp / "xdg")
    env["JAX_PCACHE_REMOTE_TIMEOUT"] = "1s"
    return env


def run(argv: list, env: dict[str, str], stdin: str = "") -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pcache", *argv],
        cwd=Path(env["HOME"]).parent,  # a relative path given is written there
        env=env,
        input=stdin.encode(),
        capture_output=True,
        timeout=120,
    )


# Runs each command in its own process, forked from one that has imported the CLI
# (and JAX) once: a real process per command (its own exit status, stdout, stderr; nothing
# shared with the next) without 200 interpreter starts.
_FORKER = r"""
import json, os, sys, traceback
from pcache.cli import main
import pcache._cache  # JAX, which some commands import (no backend is started)
jobs = json.loads(sys.stdin.read())
codes = []
for argv, cwd, files in jobs:
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.chdir(cwd)
            for fd, (path, flags) in enumerate(zip(files, (os.O_RDONLY, os.O_WRONLY, os.O_WRONLY))):
                os.dup2(os.open(path, flags), fd)
            sys.stdin = open(0, closefd=False)
            sys.stdout = open(1, "w", encoding=sys.__stdout__.encoding,
                              errors=sys.__stdout__.errors, closefd=False)
            sys.stderr = open(2, "w", encoding=sys.__stderr__.encoding,
                              errors=sys.__stderr__.errors, closefd=False)
            sys.argv = ["pcache", *argv]
            try:
                main()
                code = 0
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else (e.code is not None)
                if isinstance(e.code, str):
                    print(e.code, file=sys.stderr)
            except BaseException:
                traceback.print_exc()
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    codes.append(os.waitstatus_to_exitcode(status))
print(json.dumps(codes))
"""


def run_all(argvs: list[list], env: dict[str, str], stdin: str = "") -> list:
    """``pcache argv`` for each of ``argvs``, each in its own process: what each
    printed and its exit status (as `subprocess.run` gives them)."""
    work = Path(env["HOME"]).parent
    io = work / f"io-{os.getpid()}-{len(os.listdir(work))}"
    io.mkdir()
    (io / "in").write_bytes(stdin.encode())
    jobs = []
    for i, argv in enumerate(argvs):
        for ext in ("out", "err"):
            (io / f"{i}.{ext}").touch()
        jobs.append([argv, str(work), [str(io / "in"), str(io / f"{i}.out"), str(io / f"{i}.err")]])
    driver = subprocess.run(
        [sys.executable, "-c", _FORKER],
        env=env,
        input=json.dumps(jobs).encode(),
        capture_output=True,
        timeout=600,
    )
    assert driver.returncode == 0, driver.stderr.decode(errors="replace")[-3000:]
    codes = json.loads(driver.stdout)
    return [
        subprocess.CompletedProcess(
            argv, code, (io / f"{i}.out").read_bytes(), (io / f"{i}.err").read_bytes()
        )
        for i, (argv, code) in enumerate(zip(argvs, codes, strict=True))
    ]


def problem(proc: subprocess.CompletedProcess, what: str) -> str | None:
    """What is wrong with how a command ended, or None."""
    out = proc.stdout.decode("utf-8", "replace")
    err = proc.stderr.decode("utf-8", "replace")
    if "Traceback" in out + err:
        return f"{what}: a traceback\n{err[-3000:]}"
    if proc.returncode == 0:
        return None
    if proc.returncode not in (1, 2):
        return f"{what}: exit {proc.returncode}\n{err[-2000:]}"
    # Lines on stderr but for the question `clear` asks (answered on stdin).
    lines = [line for line in err.splitlines() if line.strip() and not line.endswith("[y/N]: ")]
    errors = [line for line in lines if line.startswith("Error: ")]
    if len(errors) != 1 or (proc.returncode == 1 and lines != errors):
        return f"{what}: not one error line: {err!r}"
    return None


def check_all(argvs: list[list], procs: list[subprocess.CompletedProcess], what: str = "") -> None:
    found = [
        p
        for argv, proc in zip(argvs, procs, strict=True)
        if (p := problem(proc, f"{what}pcache {' '.join(map(repr, argv))}"))
    ]
    assert not found, f"{len(found)} of {len(procs)}:\n" + "\n".join(found)


# -- hostile directories ---------------------------------------------------------------------


def _missing(tmp: Path) -> Path:
    return tmp / "no" / "such" / "dir"


def _a_file(tmp: Path) -> Path:
    p = tmp / "a-file"
    p.write_bytes(b"not a directory")
    return p


def _unreadable(tmp: Path) -> Path:
    p = _real(tmp)
    os.chmod(p / "store", 0)
    return p


def _real(tmp: Path) -> Path:
    d = tmp / "cache"
    with Store(d / "store") as s:
        s.put("k" * 64, b"value", meta={"function_name": "f"})
    return d


def _db_bytes(data: bytes):
    def make(tmp: Path) -> Path:
        d = tmp / "cache"
        (d / "store").mkdir(parents=True)
        (d / "store" / "store.db").write_bytes(data)
        return d

    return make


def _schema_version(version: int, foreign: bool = False):
    def make(tmp: Path) -> Path:
        d = _real(tmp)
        con = sqlite3.connect(d / "store" / "store.db")
        if foreign:
            con.execute("CREATE TABLE other (x)")
        con.execute(f"PRAGMA user_version = {version}")
        con.commit()
        con.close()
        return d

    return make


def _foreign_db(tmp: Path) -> Path:
    d = tmp / "cache"
    (d / "store").mkdir(parents=True)
    con = sqlite3.connect(d / "store" / "store.db")
    con.execute("CREATE TABLE users (name TEXT)")
    con.commit()
    con.close()
    return d


def _non_utf8(tmp: Path) -> Path:
    d = Path(os.fsdecode(os.fsencode(str(tmp)) + b"/caf\xe9-\xff"))
    with Store(d / "store") as s:
        s.put("k" * 64, b"value", meta={"function_name": "f"})
    return d


DIRS = {
    "missing": _missing,
    "file": _a_file,
    "unreadable": _unreadable,
    "garbage-db": _db_bytes(b"SQLite format 3\x00" + os.urandom(4000)),
    "random-db": _db_bytes(os.urandom(8192)),
    "empty-db": _db_bytes(b""),
    "newer-schema": _schema_version(99),
    "negative-schema": _schema_version(-3),
    "newer-foreign": _schema_version(99, foreign=True),
    "foreign-db": _foreign_db,
    "non-utf8-name": _non_utf8,
}


@pytest.mark.parametrize("kind", list(DIRS))
def test_every_command_on_a_hostile_directory(tmp_path, kind):
    """Each command, doing its work, on a directory that is not a usable cache."""
    tmp = tmp_path
    (tmp / "not-a-bundle").write_bytes(b"PCACHE-BUNDLE\r\n\x1a" + b"\x00" * 7)
    directory = DIRS[kind](tmp)
    env = _env(tmp)
    argvs = [(c, _argv(c, directory, tmp)) for c in COMMANDS if c not in NO_DIRECTORY]
    try:
        procs = run_all([a for _, a in argvs], env, stdin="n\n")
    finally:
        if kind == "unreadable":
            os.chmod(directory / "store", 0o700)
    check_all([a for _, a in argvs], procs, f"{kind}: ")


# -- hostile arguments ---------------------------------------------------------------------

BAD_VALUES = ["abc", "-1", "1e400", "99999999999999999999999TB", "NaN", "", "\udcff", "0x10", "--"]


def _option_cases() -> list[tuple[tuple[str, ...], list[str]]]:
    """Every option of every command given each bad value; every command given
    arguments it does not take."""
    cases = []
    for command in COMMANDS:
        cmd = cli
        for part in command:
            cmd = cmd.commands[part]
        for param in cmd.params:
            if isinstance(param, click.Option) and not param.is_flag and param.opts[0] != "--help":
                cases += [(command, [param.opts[0], v]) for v in BAD_VALUES]
        cases.append((command, ["--no-such-option"]))
        cases.append((command, ["extra", "arguments", "\udcfe"]))
    return cases


def test_every_option_with_bad_values(tmp_path):
    directory = _real(tmp_path)
    env = _env(tmp_path)
    (tmp_path / "not-a-bundle").write_bytes(b"garbage")
    argvs = []
    for command, args in _option_cases():
        base = _argv(command, directory, tmp_path)
        argvs.append([*base, *args])
    argvs.append(["--dir", "\udcff", "stats"])
    argvs.append(["--dir", "", "stats"])
    argvs.append(["--no-such-global-option"])
    argvs.append(["no-such-command"])
    argvs.append(["remote", "--url", "not a url", "ping"])
    argvs.append(["remote", "--url", "redis://h:notaport/0", "stats"])
    argvs.append(["remote", "--url", "unix:///no/such/socket", "gc", "--dry-run"])
    argvs.append(["explain", "\udcff" * 10])
    argvs.append(["export", str(tmp_path / "no-dir" / "x.pcb")])
    argvs.append(["export", "/proc/version"])
    argvs.append(["export", str(tmp_path)])
    procs = run_all(argvs, env)
    check_all(argvs, procs)


def _not_bundles(tmp: Path) -> dict[str, Path]:
    out = {}
    for name, data in {
        "empty": b"",
        "text": b"hello\n",
        "magic-only": b"PCACHE-BUNDLE\r\n\x1a",
        "short-header": b"PCACHE-BUNDLE\r\n\x1a\x00\x02" + b"\x00" * 10,
        "huge-lengths": b"PCACHE-BUNDLE\r\n\x1a\x00\x02" + b"\xff" * 80,
        "format-1": b"PCACHE-BUNDLE\r\n\x1a" + b"\x00\x01" + b"\x00" * 80,
        "random": os.urandom(5000),
        "sqlite": b"SQLite format 3\x00" + b"\x00" * 100,
    }.items():
        p = tmp / f"{name}.pcb"
        p.write_bytes(data)
        out[name] = p
    out["a-directory"] = tmp
    out["missing"] = tmp / "missing.pcb"
    out["non-utf8"] = Path(os.fsdecode(os.fsencode(str(tmp)) + b"/\xff.pcb"))
    out["non-utf8"].write_bytes(b"\xff" * 100)
    return out


def test_import_of_files_that_are_not_bundles(tmp_path):
    env = _env(tmp_path)
    dest = tmp_path / "dest"
    argvs = [
        ["--dir", str(dest), "import", str(p), "--no-device-check", *flags]
        for p in _not_bundles(tmp_path).values()
        for flags in (["--trust-unsigned"], ["--verify-key", str(p)], ["--verify-key", "/no/key"])
    ]
    procs = run_all(argvs, env)
    check_all(argvs, procs)
    assert all(proc.returncode != 0 for proc in procs)


_TOKENS = st.one_of(
    st.sampled_from(["--max-size", "--older-than", "--top", "--limit", "--sort", "--json",
                     "--fix", "--yes", "--dry-run", "--stale", "--since", "--function",
                     "--namespace", "--all", "-h", "--", "-", "=", "0", "-0", "1k", "30d"]),
    st.text(max_size=12),
)  # fmt: skip


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    command=st.sampled_from([c for c in COMMANDS if c[0] != "remote"]),
    args=st.lists(_TOKENS, max_size=5),
)
def test_random_arguments_never_show_a_traceback(tmp_path, command, args):
    directory = tmp_path / "cache"
    if not directory.exists():
        _real(tmp_path)
    args = [a.replace("\x00", "") for a in args]
    proc = run(["--dir", str(directory), *command, *args], _env(tmp_path), stdin="n\n")
    assert problem(proc, f"pcache {' '.join(command)} {args!r}") is None
