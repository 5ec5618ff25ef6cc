"""Fresh Python processes for the cross-process tests, forked from one that imported
JAX once.

Most cross-process tests start ``python PROG`` (or ``-c CODE``, ``-m MODULE``) a few
times, and importing JAX is most of what such a process costs. `run` has a zygote
(this file, run as ``python -m tests.zygote``) fork it instead: the zygote imports
numpy and JAX and nothing else (never pcache: a child starts pcache as a fresh
process does, from ``JAX_PCACHE_DIR`` when JAX first makes a backend, which the
zygote never does); each child is its own process, with the request's environment,
working directory, ``sys.path``, ``sys.argv`` and output files, running its program
as ``__main__`` and exiting as that program does (atexit handlers and all). A
request whose environment differs in what a process reads before JAX makes a
backend (``JAX_*`` but pcache's, ``XLA_*``, ``TF_*``, ``PYTHON*`` but the path) gets
a zygote of its own environment; one with interpreter flags, or
``PCACHE_TESTS_NO_ZYGOTE`` set, is a plain subprocess.

Protocol: a JSON request per line on the zygote's stdin; per request it writes the
child's pid, then its exit status, a line each.
"""

from __future__ import annotations

import atexit
import json
import os
import runpy
import select
import subprocess
import sys
import tempfile
import time
import traceback
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# ---- the test side


#: the key of `_early` -> the zygote started for it (False: it could not start)
_ZYGOTES: dict = {}


def _early(env: dict) -> tuple:
    """What of ``env`` a process reads before JAX makes its first backend."""
    return tuple(
        sorted(
            (k, v)
            for k, v in env.items()
            if (k.startswith(("JAX_", "XLA_", "TF_")) and not k.startswith("JAX_PCACHE"))
            or (k.startswith("PYTHON") and k != "PYTHONPATH")
        )
    )


def run(argv: list[str], env: dict, cwd: Path | str, timeout: float) -> subprocess.CompletedProcess:
    """``python *argv`` in ``env`` and ``cwd``, its output captured as text: a child of
    a zygote where `_zygote` has one, else a plain subprocess."""
    got = None
    if argv and (argv[0] in ("-c", "-m") or not argv[0].startswith("-")):
        got = _forked(argv, env, cwd, timeout)
    if got is None:
        got = subprocess.run(
            [sys.executable, *argv], env=env, cwd=cwd, capture_output=True, text=True,
            timeout=timeout,
        )  # fmt: skip
    return got


def _zygote(env: dict) -> subprocess.Popen | None:
    key = _early(env)
    z = _ZYGOTES.get(key)
    if z is None:
        base = {k: v for k, v in os.environ.items() if not k.startswith(("JAX_", "XLA_", "TF_"))}
        base = {k: v for k, v in base.items() if not k.startswith("PYTHON")}
        base.update(key, PYTHONPATH=str(ROOT))
        try:
            z = subprocess.Popen(
                [sys.executable, "-m", "tests.zygote"], env=base, cwd=ROOT,
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0,
            )  # fmt: skip
            atexit.register(z.kill)
        except OSError:
            z = False
        _ZYGOTES[key] = z
    return z if z and z.poll() is None else None


def _line(z: subprocess.Popen, seconds: float) -> int | None:
    """The next line the zygote writes, as a number (None: none within ``seconds``)."""
    got = b""
    deadline = time.monotonic() + seconds
    while not got.endswith(b"\n"):
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([z.stdout], [], [], left)[0]:
            return None
        chunk = os.read(z.stdout.fileno(), 1)
        if not chunk:
            return None
        got += chunk
    return int(got)


def _forked(argv: list, env: dict, cwd: Path | str, timeout: float):
    if os.environ.get("PCACHE_TESTS_NO_ZYGOTE"):
        return None
    z = _zygote(env)
    if z is None:
        return None
    with tempfile.TemporaryDirectory() as d:
        out, err = os.path.join(d, "out"), os.path.join(d, "err")
        req = {"argv": argv, "env": env, "cwd": str(cwd), "out": out, "err": err}
        z.stdin.write(json.dumps(req).encode() + b"\n")
        pid = _line(z, 60)
        if pid is None:  # (the zygote died: plain subprocesses for this environment)
            _ZYGOTES[_early(env)] = False
            return None
        rc = _line(z, timeout)
        if rc is None:
            os.kill(pid, 9)
            raise subprocess.TimeoutExpired([sys.executable, *argv], timeout)
        return subprocess.CompletedProcess(
            argv, rc, Path(out).read_text(errors="replace"), Path(err).read_text(errors="replace")
        )


# ---- the zygote


def _serve() -> dict | None:
    """Fork a child per request; in the child, its request (None: stdin closed)."""
    import jax  # noqa: F401 (what the children share)
    import jax.numpy  # noqa: F401
    import numpy  # noqa: F401

    while line := sys.stdin.readline():
        req = json.loads(line)
        pid = os.fork()
        if pid == 0:
            return req
        print(pid, flush=True)
        _, status = os.waitpid(pid, 0)
        print(os.waitstatus_to_exitcode(status), flush=True)
    return None


def _child(req: dict, base_path: list, own: list) -> int:
    os.environ.clear()
    os.environ.update(req["env"])
    os.chdir(req["cwd"])
    for fd, path, flags in (
        (0, os.devnull, os.O_RDONLY),
        (1, req["out"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
        (2, req["err"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
    ):
        got = os.open(path, flags, 0o600)
        os.dup2(got, fd)
        os.close(got)
    argv = req["argv"]
    # (sys.path as such a process has it: its first entry, PYTHONPATH's, the site's)
    first = {"-c": "", "-m": os.getcwd()}.get(argv[0])
    if first is None:
        first = os.path.dirname(os.path.abspath(argv[0]))
    extra = [p for p in req["env"].get("PYTHONPATH", "").split(os.pathsep) if p]
    sys.path[:] = [first, *extra, *(p for p in base_path[1:] if p not in own)]
    sys.orig_argv = [sys.executable, *argv]  # (what a program that runs itself again execs)
    try:
        if argv[0] == "-m":
            sys.argv = [argv[1], *argv[2:]]
            runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
        elif argv[0] == "-c":
            sys.argv = ["-c", *argv[2:]]
            main = types.ModuleType("__main__")
            main.__builtins__ = __builtins__
            sys.modules["__main__"] = main
            exec(compile(argv[1], "<string>", "exec"), main.__dict__)
        else:
            sys.argv = list(argv)
            runpy.run_path(argv[0], run_name="__main__")
    except SystemExit as e:
        if e.code is None or isinstance(e.code, int):
            return e.code or 0
        print(e.code, file=sys.stderr)
        return 1
    except BaseException:
        traceback.print_exc()
        return 1
    return 0


if __name__ == "__main__":
    _path = list(sys.path)
    _own = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    request = _serve()
    if request is not None:  # (the child: exits as the program it ran)
        sys.exit(_child(request, _path, _own))
