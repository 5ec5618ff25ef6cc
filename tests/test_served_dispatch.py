"""A served trace runs by its jaxpr (`pcache._served`): a re-created callable's
first call goes through JAX's jaxpr-keyed C++ dispatch instead of JAX's slow path,
with the same results (bitwise, against stock JAX), the same donation, the same
errors and the same warnings; a callable called again builds its own fast path.

The slow path is counted by JAX's own test event for it (``jit_cpp_cache_miss``,
what JAX's tests count with ``count_pjit_cpp_cache_miss``).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax._src import util as jax_util

import pcache
from pcache import _trace
from tests import progs

X = jnp.linspace(-1.0, 1.0, 16, dtype=jnp.float32).reshape(4, 4)


@pytest.fixture
def slow_path_calls():
    """A list that JAX's slow path appends to (one item per slow-path call)."""
    calls: list = []
    before = jax_util.test_event_listener

    def listener(name, *args):
        if name == "jit_cpp_cache_miss":
            calls.append(name)
        if before is not None:
            before(name, *args)

    jax_util.test_event_listener = listener
    try:
        yield calls
    finally:
        jax_util.test_event_listener = before


def _bits(out) -> list[bytes]:
    return [np.asarray(leaf).tobytes() for leaf in jax.tree_util.tree_leaves(out)]


def f_loss(x):
    return jnp.mean(jnp.tanh(x @ x.T))


def _fresh():
    jax.clear_caches()
    _trace.forget_states()


def test_re_created_callables_run_by_the_jaxpr_with_stock_results(tmp_path, slow_path_calls):
    xs = [X * i for i in range(8)]

    def steps():
        return [_bits(jax.jit(jax.grad(f_loss))(x)) for x in xs]

    _fresh()
    del slow_path_calls[:]
    stock = steps()
    assert len(slow_path_calls) == 8  # stock: every new jit object's first call
    _fresh()
    with pcache.enabled(tmp_path / "c", raise_errors=True, check=False):
        del slow_path_calls[:]
        cached = steps()
        st = pcache.stats()
    assert cached == stock
    assert st["trace_hits"] >= 5
    # the traced calls and the first served one take the slow path; the later
    # served calls run from C++ by the recorded jaxpr
    assert len(slow_path_calls) <= 8 - st["trace_hits"] + 1


def test_a_served_callable_called_again_builds_its_own_fast_path(tmp_path, slow_path_calls):
    _fresh()
    with pcache.enabled(tmp_path / "c", raise_errors=True, check=False):
        for _ in range(4):  # traced, recorded, then served (by the jaxpr from then on)
            jax.jit(jax.grad(f_loss))(X)
        hits = pcache.stats()["trace_hits"]
        assert hits >= 1
        g = jax.jit(jax.grad(f_loss))
        del slow_path_calls[:]
        first = _bits(g(X))
        assert pcache.stats()["trace_hits"] == hits + 1
        assert slow_path_calls == [] and g._cache_size() == 0  # its entry dropped
        second = _bits(g(X))
        assert len(slow_path_calls) == 1 and g._cache_size() == 1  # its fast path built
        later = [_bits(g(X)) for _ in range(3)]
        assert len(slow_path_calls) == 1  # from C++
    _fresh()
    stock = _bits(jax.jit(jax.grad(f_loss))(X))
    assert first == second == stock and all(x == stock for x in later)


def test_donation_through_the_jaxpr_dispatch_is_stock(tmp_path):
    def steps():
        out, deleted = [], []
        for i in range(6):
            y = jnp.full((4,), float(i))
            out.append(_bits(jax.jit(lambda a: a * 2.0 + 1.0, donate_argnums=0)(y)))
            deleted.append(y.is_deleted())
        return out, deleted

    _fresh()
    stock = steps()
    _fresh()
    with pcache.enabled(tmp_path / "c", raise_errors=True, check=False):
        cached = steps()
        assert pcache.stats()["trace_hits"] >= 3
    assert cached == stock


def test_a_lowering_that_warned_keeps_warning_on_every_served_call(tmp_path):
    """An unusable donation warns at lowering: a served call of such a jaxpr takes
    the slow path, where the warning is issued again, never the C++ dispatch."""

    def steps():
        counts = []
        for _ in range(6):
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                jax.jit(lambda a, b: a.sum() + b.sum(), donate_argnums=0)(X, X)
            counts.append(sum("donated buffers were not usable" in str(m.message) for m in w))
        return counts

    _fresh()
    stock = steps()
    assert stock == [1] * 6
    _fresh()
    with pcache.enabled(tmp_path / "c", raise_errors=True, check=False):
        assert steps() == stock
        assert pcache.stats()["trace_hits"] >= 3


_ERRORS = textwrap.dedent(
    """
    import os, sys
    os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=2"
    import jax, jax.numpy as jnp
    import pcache
    if sys.argv[1] == "pcache":
        pcache.enable(sys.argv[2], raise_errors=True, check=False)
    d0, d1 = jax.devices()[:2]
    x0, x1 = jax.device_put(jnp.ones(3), d0), jax.device_put(jnp.ones(3), d1)

    def errors():
        out = []
        for i in range(8):  # good calls, then arguments on two devices
            try:
                out.append(str(jax.jit(lambda a, b: a + b)(x0, x1 if i > 3 else x0)))
            except Exception as e:
                out.append(f"{type(e).__name__}: {e}")
        for i in range(5):  # good calls, then a deleted argument
            y = jnp.ones(3)
            if i == 4:
                y.delete()
            try:
                out.append(str(jax.jit(lambda a: a * 3.0)(y)))
            except Exception as e:
                out.append(f"{type(e).__name__}: {e}")
        jax.config.update("jax_debug_nans", True)
        for _ in range(5):  # checks in the slow path
            try:
                jax.jit(lambda a: jnp.log(a - 2.0))(jnp.ones(3))
            except Exception as e:
                out.append(type(e).__name__)
        return out

    for line in errors():
        print(line.splitlines()[0])
    """
)


def test_errors_are_raised_as_stock_raises_them(tmp_path):
    def run(*mode):
        p = subprocess.run(
            [sys.executable, "-c", _ERRORS, *mode], capture_output=True, text=True, timeout=300
        )
        assert p.returncode == 0, p.stderr[-3000:]
        return p.stdout

    stock = run("stock")
    assert stock.count("ValueError") == 4 and "deleted" in stock
    assert stock.count("FloatingPointError") == 5
    assert run("pcache", str(tmp_path / "c")) == stock


@pytest.mark.parametrize("name", sorted(progs.PATTERNS))
def test_the_seed_patterns_run_by_the_jaxpr_with_stock_results(tmp_path, name, slow_path_calls):
    """Every seed pattern, re-created each step: bitwise stock results, and fewer of
    JAX's slow-path calls than stock (served steps run by the jaxpr; CI's check mode
    traces every served call instead, so it never reaches this path)."""
    step = progs.PATTERNS[name]
    x, w = progs.inputs()
    jax.block_until_ready((x, w))

    def steps():
        return [progs.digest(jax.block_until_ready(step(x, w))) for _ in range(8)]

    _fresh()
    del slow_path_calls[:]
    stock = steps()
    stock_slow = len(slow_path_calls)
    _fresh()
    with pcache.enabled(tmp_path / "c", raise_errors=True, check=False):
        del slow_path_calls[:]
        cached = steps()
        hits = pcache.stats()["trace_hits"]
    assert cached == stock
    assert hits >= 5, name
    if stock_slow:  # (the AOT pattern calls its Compiled object: no slow path in stock)
        assert len(slow_path_calls) < stock_slow, (name, len(slow_path_calls), stock_slow)
