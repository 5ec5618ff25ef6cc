#!/usr/bin/env python3
"""Set up a virtual environment and run the demo or the tests.

    python3 scripts/dev.py demo    # the JAX demo: cold, then warm in a fresh process
    python3 scripts/dev.py test    # lint, then the suite under JAX_PCACHE_CHECK=1, a worker per core (CI)

The remote tier's tests need a real redis-server: `test` installs Debian's package
when none is on PATH (as root, or with passwordless sudo). The tests start and stop
their own servers on loopback ports.

Only needs `python3`. The environment lives in `.venv/` next to pyproject.toml and
is reinstalled when pyproject.toml changes. Extra arguments go to pytest/the demo.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / ".venv"
PY = VENV / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def run(*cmd: str | Path) -> None:
    print("+", " ".join(str(c) for c in cmd), flush=True)
    subprocess.run([str(c) for c in cmd], cwd=ROOT, check=True)


def ensure_env() -> None:
    stamp = VENV / ".pcache-installed"
    want = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()
    if PY.exists() and stamp.exists() and stamp.read_text() == want:
        _compile_own()
        return
    if not PY.exists():
        print(f"+ python3 -m venv {VENV}", flush=True)
        venv.EnvBuilder(with_pip=True).create(VENV)
    run(PY, "-m", "pip", "install", "--quiet", "--upgrade", "pip")
    run(PY, "-m", "pip", "install", "--quiet", "-e", ".[test,bench]")
    stamp.write_text(want)
    _compile_own()


def _compile_own() -> None:
    """pcache's own bytecode caches, as a wheel install has them (an editable one under
    ``PYTHONDONTWRITEBYTECODE`` has none: every process would compile the sources it
    imports, and pcache's provenance check reads a file's compiled form); only the
    files changed since are compiled again."""
    subprocess.run([str(PY), "-m", "compileall", "-q", "pcache", "store"], cwd=ROOT,
                   check=True, stdout=subprocess.DEVNULL)  # fmt: skip


def ensure_redis() -> None:
    """A redis-server binary for the remote tier's tests: Debian's, installed when
    missing. Without one those tests fail (they never skip), saying how to get it."""
    if os.environ.get("PCACHE_REDIS_SERVER") or shutil.which("redis-server"):
        return
    sudo = [] if os.geteuid() == 0 else ["sudo", "-n"]
    if not shutil.which("apt-get") or (sudo and not shutil.which("sudo")):
        print("! redis-server is missing and cannot be installed here; the remote tier's "
              "tests will fail (install redis-server, or set PCACHE_REDIS_SERVER)", flush=True)  # fmt: skip
        return
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = [*sudo, "apt-get", "install", "-y", "-q", "--no-install-recommends", "redis-server"]
    print("+", " ".join(install), flush=True)
    if subprocess.run(install, env=env, stdout=subprocess.DEVNULL).returncode != 0:
        run(*sudo, "apt-get", "update", "-q")
        subprocess.run(install, env=env, check=True, stdout=subprocess.DEVNULL)


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in {"demo", "test"}:
        print(__doc__)
        return 2
    ensure_env()
    what, rest = argv[0], argv[1:]
    try:
        if what == "demo":
            run(PY, "scripts/demo.py", *rest)
        else:
            ensure_redis()
            run(PY, "-m", "ruff", "check", ".")
            run(PY, "-m", "ruff", "format", "--check", ".")
            if not rest:  # the whole suite, as CI runs it
                # Every key recomputed without memos and compared (pcache.CheckError).
                os.environ["JAX_PCACHE_CHECK"] = "1"
                # A worker per core (at most 4), each test file whole on one worker
                # (its module fixtures run once).
                # The slowest tests named, for the 15-minute budget of CI.
                rest = ["-n", "auto", "--maxprocesses", "4", "--dist", "loadfile", "--durations=25"]
            run(PY, "-m", "pytest", "-q", *rest)
    except subprocess.CalledProcessError as exc:
        return exc.returncode or 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
