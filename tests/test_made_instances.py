"""Instances of installed library classes that the program made (issue 27, phase 3):
keyed by class and attributes, and taken as the program's state where JAX runs a
trace's Python later (`pcache._late`). A library here is a package installed into a
``site-packages`` directory with its ``RECORD``, run in fresh processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import libsite

ROOT = Path(__file__).resolve().parent.parent

LIB = """
class Affine:
    def __init__(self, loc, scale):
        self.loc = loc
        self.scale = scale

    def __call__(self, x):
        return self.loc + self.scale * x
"""

PROG = """
import functools, json, os, sys
sys.path.insert(0, sys.argv[1])
import jax, jax.numpy as jnp, numpy as np
from madelib import Affine


def make(t):
    def f(x):
        cj = jax.custom_jvp(jnp.sin)  # (made while traced: no key walks it)
        cj.defjvp(functools.partial(jax.jvp, t))  # (its rule: library code over t)
        return cj(x)
    return jax.jit(f)


x = jnp.float32(0.5)
out = []
out.append(make(Affine(0.0, 2.0))(x))
t2 = Affine(0.0, 2.0)
out.append(make(t2)(x))
t2.scale = 5.0  # (the program changes the instance a recorded trace's rule reads)
f3 = make(Affine(0.0, 2.0))
out.append(f3(x))
out.append(jax.grad(f3)(x))
stats = {}
if os.environ.get("JAX_PCACHE_DIR"):
    import pcache
    stats = {k: pcache.stats()[k] for k in ("trace_hits", "trace_unrecorded")}
print(json.dumps({"out": [np.asarray(a).tobytes().hex() for a in out], "stats": stats}))
"""


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    root = libsite.install(tmp_path_factory.mktemp("made") / "site-packages", "madelib", LIB)
    (root.parent / "prog.py").write_text(PROG)
    return root


def _run(site: Path, cache: Path | None) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("JAX_PCACHE_")}
    env.update(JAX_PLATFORMS="cpu", PYTHONPATH=str(ROOT))
    if cache is not None:
        env.update(JAX_PCACHE_DIR=str(cache), JAX_PCACHE_RAISE_ERRORS="1")
        env["JAX_PCACHE_TRACE_RECORD_AFTER"] = "1"
    proc = subprocess.run(
        [sys.executable, str(site.parent / "prog.py"), str(site)],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.splitlines()[-1])


def test_a_made_instance_a_later_rule_reads_is_the_program_s_state(site, tmp_path):
    """A trace whose custom_jvp rule (library code, made while traced) reads an
    instance the program made is not recorded for equal callables: the program may
    change the instance afterwards, and a later grad of an equal callable would get
    the rule's result for the changed one (review 115: 5.0 where stock gives 2.0)."""
    stock = _run(site, None)
    got = _run(site, tmp_path / "c")
    assert got["out"] == stock["out"]
    assert got["stats"]["trace_unrecorded"].get("later-reads-program-data", 0) >= 1
