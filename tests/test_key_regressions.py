"""Regressions: inputs that once failed to reach the key (each was a false hit)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import pcache


@pytest.fixture
def cache(tmp_path):
    # These tests re-create wrappers to exercise the lowering key and its memos;
    # trace reuse would serve them before the key is taken (tests/test_trace_reuse.py).
    path = pcache.enable(tmp_path / "cache", raise_errors=True, trace_reuse=False)
    yield path
    pcache.disable()


def test_repeated_compiler_options_last_one_wins(cache):
    # AOT .compile(opts) appends to jit's compiler_options; XLA applies the last
    # value of a repeated option. Sorting before deduplicating once made these
    # two calls share a key (and the second returned the first one's result).
    x = jnp.array([1.0, np.nan, 3.0], dtype=jnp.float32)
    opt = "xla_cpu_enable_fast_min_max"

    def fresh():
        return lambda v: jnp.max(v)

    fast = jax.jit(fresh(), compiler_options={opt: False}).lower(x).compile({opt: True})(x)
    exact = jax.jit(fresh(), compiler_options={opt: True}).lower(x).compile({opt: False})(x)
    assert float(fast) == 3.0
    assert np.isnan(float(exact))


@pytest.mark.parametrize(
    ("flag", "value"),
    [
        ("jax_disable_most_optimizations", True),
        ("jax_compiler_enable_remat_pass", False),
        ("jax_optimization_level", "O0"),
    ],
)
def test_compile_config_changed_mid_process_changes_the_key(cache, flag, value):
    x = jnp.ones((4,))
    before = pcache.key(lambda v: v * 2 + 1, x)
    old = pcache._compat.config_value(flag)
    jax.config.update(flag, value)
    try:
        after = pcache.key(lambda v: v * 2 + 1, x)
    finally:
        jax.config.update(flag, old)
    assert "jax_config" in before.diff(after)
    assert pcache.key(lambda v: v * 2 + 1, x).digest == before.digest


def test_pcache_frames_stay_out_of_compiled_metadata(cache):
    x = jnp.ones((8, 8), jnp.float32)
    text = jax.jit(lambda v: jnp.tanh(v @ v + 1.0).sum(0)).lower(x).compile().as_text()
    assert "pcache/" not in text and "lowering_wrapper" not in text


def test_memoized_computations_respect_devices_and_defaults(cache):
    # After a program hits once, later calls reuse its MeshComputation by content:
    # the device an argument is committed to, and jax.default_device, must still
    # pick the right executable on every call.
    devs = jax.devices()
    assert len(devs) >= 6
    x = np.arange(8, dtype=np.float32)
    for _ in range(3):
        for d in (3, 5):
            out = jax.jit(lambda a: a * 2 + 1)(jax.device_put(x, devs[d]))
            assert [dv.id for dv in out.devices()] == [d]
            assert np.asarray(out).tobytes() == (x * 2 + 1).tobytes()
        for d in (2, 4):
            with jax.default_device(devs[d]):
                out = jax.jit(lambda a: a * 3)(x)
            assert [dv.id for dv in out.devices()] == [d]
    assert pcache.stats()["memory_hits"] >= 8  # 4 programs x 3 rounds, 4 misses


def _user_primitive(scale: float):
    from jax.extend.core import Primitive
    from jax.interpreters import mlir

    prim = Primitive("pcache_test_user_scale")
    prim.def_abstract_eval(lambda x: x)
    mlir.register_lowering(prim, mlir.lower_fun(lambda x: x * scale, multiple_results=False))
    return prim


def test_user_lowering_rules_are_never_persisted(cache):
    # The key names a primitive, not its lowering rule. A rule from user code may
    # change between runs under the same jaxpr, so such programs stay in memory.
    from jax.extend.core import Primitive
    from jax.extend.mlir.dialects import stablehlo
    from jax.interpreters import mlir

    from pcache import store

    prim = Primitive("pcache_test_user_rule")
    prim.def_abstract_eval(lambda x: x)
    mlir.register_lowering(prim, lambda ctx, x: [stablehlo.multiply(x, x)])
    x = jax.device_put(np.arange(4.0, dtype=np.float32))
    k = pcache.key(lambda v: prim.bind(v), x)
    assert not k.persistent and k.local_why == "user-lowering-rule:pcache_test_user_rule"
    out = [np.asarray(jax.jit(lambda v: prim.bind(v))(x)) for _ in range(3)]
    assert all(o.tobytes() == (np.arange(4.0, dtype=np.float32) ** 2).tobytes() for o in out)
    assert pcache.stats()["memory_hits"] >= 2
    with store.Store(cache / "store") as s:
        assert not [e for e in s.entries() if not e.key.startswith("hlo-")]


def test_a_program_s_constant_handler_keys_by_the_lowered_module(cache):
    """A constant handler (``mlir.register_constant_handler``) decides how every
    literal lowers: one of the program's, registered between two calls, makes the
    next call's key its lowered module's (review 80: it served the old executable),
    never a persisted one; JAX's own handler back, the first executable again."""
    from jax._src import literals
    from jax._src.interpreters import mlir

    x = jax.device_put(np.arange(3.0, dtype=np.float32))
    stock = np.asarray(x) * np.float32(2.0)
    t = literals.TypedNdArray
    saved, nd = mlir._constant_handlers[t], mlir.get_constant_handler(np.ndarray)
    assert np.asarray(jax.jit(lambda a: a * 2.0)(x)).tobytes() == stock.tobytes()
    mlir.register_constant_handler(t, lambda val, aval=None: nd(np.asarray(val) * 3, aval))
    try:
        k = pcache.key(lambda a: a * 2.0, x)
        assert not k.persistent and k.local_why == "user-lowering-handler"
        tripled = np.asarray(jax.jit(lambda a: a * 2.0)(x))
    finally:
        mlir._constant_handlers[t] = saved
    assert tripled.tobytes() == (np.asarray(x) * np.float32(6.0)).tobytes()
    assert np.asarray(jax.jit(lambda a: a * 2.0)(x)).tobytes() == stock.tobytes()
    assert pcache.key(lambda a: a * 2.0, x).persistent


def test_lower_fun_rules_are_keyed_by_what_they_lower(cache):
    """`mlir.lower_fun(f)` over user code (equinox's unvmap_any, ...) lowers what
    tracing `f` gives when the program is lowered: such a program is stored under
    its key completed by the lowered module (every hit lowers), so a rule that
    lowers otherwise (another closure value, registered again) is another program,
    in this process and the next."""
    from jax.interpreters import mlir

    from pcache import store

    x = jax.device_put(np.arange(4.0, dtype=np.float32))
    three = _user_primitive(3.0)
    k3 = pcache.key(lambda v: three.bind(v), x)
    assert k3.persistent and k3.relower
    assert np.asarray(jax.jit(lambda v: three.bind(v))(x)).tolist() == [0.0, 3.0, 6.0, 9.0]
    four = 4.0
    mlir.register_lowering(three, mlir.lower_fun(lambda v: v * four, multiple_results=False))
    assert np.asarray(jax.jit(lambda v: three.bind(v))(x)).tolist() == [0.0, 4.0, 8.0, 12.0]
    four = 5.0  # the rule's closure changed: it lowers otherwise, under another key
    assert np.asarray(jax.jit(lambda v: three.bind(v))(x)).tolist() == [0.0, 5.0, 10.0, 15.0]
    four = 4.0  # back: the second program's entry
    before = pcache.stats()["memory_hits"]
    assert np.asarray(jax.jit(lambda v: three.bind(v))(x)).tolist() == [0.0, 4.0, 8.0, 12.0]
    assert pcache.stats()["memory_hits"] == before + 1
    with store.Store(cache / "store") as s:
        assert len([e for e in s.entries() if not e.key.startswith("hlo-")]) == 3


_HOISTED_CONSTANTS = """
import sys, tempfile
import numpy as np, jax, pcache

def run():
    out = []
    x = np.ones(1000, np.float32)
    a = np.zeros(1000, np.float32)
    for _ in range(4):
        out.append(float(jax.jit(lambda v: v + a)(x)[0]))
    a[:] = 5  # mutate the buffer a memoized computation would hold
    for _ in range(3):
        out.append(float(jax.jit(lambda v: v + a)(x)[0]))
    b = np.zeros(1000, np.float32)  # old content, another buffer
    for _ in range(3):
        out.append(float(jax.jit(lambda v: v + b)(x)[0]))
    d0, d1 = jax.devices()[:2]
    for i in range(6):  # equal constant content, placed on alternating devices
        c = jax.device_put(np.arange(4, dtype=np.float32), (d0, d1)[i % 2])
        r = jax.jit(lambda v: v + c)(np.zeros(4, np.float32))
        out.append(sorted(d.id for d in r.devices()))
    return out

stock = run()
pcache.enable(tempfile.mkdtemp(), raise_errors=True)
cached = run()
assert stock == cached, (stock, cached)
assert stock[7:10] == [1.0, 1.0, 1.0], stock
print("ok")
"""


def test_hoisted_constants_are_never_shared_between_calls():
    # With jax_use_simplified_jaxpr_constants, closed-over arrays become arguments
    # held by the MeshComputation: reusing one across calls with equal content
    # once returned a mutated buffer's values and ran on another call's device.
    import os
    import subprocess
    import sys

    env = dict(
        os.environ,
        JAX_USE_SIMPLIFIED_JAXPR_CONSTANTS="1",
        XLA_FLAGS="--xla_force_host_platform_device_count=2",
    )
    env.pop("JAX_PCACHE_DIR", None)
    proc = subprocess.run(
        [sys.executable, "-c", _HOISTED_CONSTANTS],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-3000:]


def test_memoized_computation_keeps_the_function_name(cache):
    def foo(alpha):
        return alpha * 5

    def bar(beta):
        return beta * 5

    x = jnp.ones((4,))
    for _ in range(3):
        jax.jit(bar)(x)
        jax.jit(foo)(x)
    assert "jit_foo" in jax.jit(foo).lower(x).as_text()
    assert "jit_bar" in jax.jit(bar).lower(x).as_text()
