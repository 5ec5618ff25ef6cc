"""`pcache._bytecode` reads instructions from raw code, for speed, where the walker's
facts about library files depend on every one: it must agree with ``dis`` exactly,
on this interpreter and on every other CPython this machine has (3.10 has no inline
caches; 3.11 flags ``LOAD_GLOBAL``'s name index; 3.12 ``LOAD_ATTR``'s too)."""

import glob
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

import pcache._bytecode

HERE = Path(__file__).parent


def _interpreters() -> list[str]:
    found = {sys.executable}
    for v in range(10, 15):
        found.add(shutil.which(f"python3.{v}") or "")
    found |= set(glob.glob(os.path.expanduser("~/.pyenv/versions/3.1[0-9]*/bin/python3")))
    ok = []
    for exe in sorted(found - {""}):
        try:  # (a pyenv shim of a version not selected fails: not an interpreter here)
            r = subprocess.run([exe, "-c", "import dis"], capture_output=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if r.returncode == 0:
            ok.append(exe)
    return ok


@pytest.mark.parametrize("exe", _interpreters())
def test_raw_reads_equal_dis_on_each_interpreter(exe):
    roots = [sysconfig.get_paths()["stdlib"]] if exe == sys.executable else []
    out = subprocess.run(
        [exe, "-c", "import sysconfig; print(sysconfig.get_paths()['stdlib'])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    roots = sorted({*roots, out, os.path.join(out, "json"), os.path.join(out, "asyncio")})
    if exe == sys.executable:  # (and the library files a JAX process reads)
        import jax

        roots += [os.path.join(os.path.dirname(jax.__file__), "_src")]
    r = subprocess.run(
        [exe, str(HERE / "bytecode_check.py"), pcache._bytecode.__file__, *roots],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    last = r.stdout.strip().splitlines()[-1]
    codes, differ = int(last.split()[1]), int(last.split()[3])
    assert codes > 5000 and differ == 0, r.stdout[-2000:]
