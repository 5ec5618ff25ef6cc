"""Regressions found by JAX's own test suite (scripts/jax_tests.py), each a minimal
reproducer of a test that failed only with pcache, checked against stock JAX."""

from __future__ import annotations

import contextlib
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import pcache


@pytest.fixture(params=[False, True], ids=["lowering-key", "trace-reuse"])
def cache(tmp_path, request):
    path = pcache.enable(tmp_path / "cache", raise_errors=True, trace_reuse=request.param)
    yield path
    pcache.disable()


@contextlib.contextmanager
def _config(name, value):
    old = pcache._compat.config_value(name)
    jax.config.update(name, value)
    try:
        yield
    finally:
        jax.config.update(name, old)


def _captured_constants_warnings() -> list[bool]:
    """jax_jit_test.py::test_check_for_large_number_of_constants_old, both ways:
    whether each call of a re-created jit over a large captured constant warns,
    under a threshold that changes between calls."""
    y = jnp.ones((128, 128), dtype=np.float32)
    x = jnp.zeros((128,), dtype=np.float32)

    def jit_maker():
        def func(v):
            return v @ y

        return jax.jit(func)

    seen = []
    for limit in (-1, y.nbytes, y.nbytes + 1, -1, y.nbytes, y.nbytes + 1):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            with _config("jax_captured_constants_warn_bytes", limit):
                out = jit_maker()(x)
        assert np.asarray(out).tobytes() == np.asarray(x @ y).tobytes()
        seen.append(any("A large amount of constants" in str(m.message) for m in w))
    return seen


def test_captured_constants_warning_follows_the_current_threshold(cache):
    """A hit replays the warnings of the lowering it skips; whether lowering warns
    about captured constants is decided by jax_captured_constants_warn_bytes, so the
    setting is in the key: a hit never replays a warning the setting now suppresses,
    nor skips one it now asks for."""
    got = _captured_constants_warnings()
    pcache.disable()
    stock = _captured_constants_warnings()
    assert stock == [False, True, False, False, True, False]
    assert got == stock


_COMPILES = [0]


def _listen(name, secs, **kw):
    if name == "/jax/core/compile/backend_compile_duration":
        _COMPILES[0] += 1


jax.monitoring.register_event_duration_secs_listener(_listen)


def _reports_with_frames() -> list[str]:
    """The captured-constants report with source frames, for two functions that trace
    to one program from different lines."""
    y = jnp.ones((128, 128), dtype=np.float32)
    x = jnp.zeros((128,), dtype=np.float32)

    def first(v):
        return v @ y

    def second(v):
        return v @ y

    lines = []
    with _config("jax_captured_constants_warn_bytes", 1000):
        with _config("jax_captured_constants_report_frames", 2):
            for f in (first, second):
                with warnings.catch_warnings(record=True) as w:
                    warnings.simplefilter("always")
                    jax.jit(f)(x)
                lines.append(
                    [ln for m in w for ln in str(m.message).splitlines() if __file__ in ln]
                )
    return lines


def test_captured_constants_report_names_the_function_lowered(cache):
    """With report frames on, the warning names where the constant is used: text the
    key (no debug information) does not determine. A hit of a program whose lowering
    warned then lowers for real (JAX issues the warning), and still skips the compile."""
    before = _COMPILES[0]
    got = _reports_with_frames()
    compiles = _COMPILES[0] - before
    pcache.disable()
    stock = _reports_with_frames()
    assert stock[0] and stock[1] and stock[0] != stock[1]
    assert got == stock
    assert compiles == 1
