"""Canonical jaxpr fingerprint: equal exactly when the compiled program is the same."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.extend.core import Primitive

from pcache import _canon, _key
from pcache._errors import Uncacheable
from pcache._key import CacheKey

X = jnp.ones((4, 4), jnp.float32)


def D(fun, *args):
    """Digest of the jaxpr that jit lowers for fun(*args)."""
    return _canon.jaxpr_digest(jax.jit(fun).trace(*args).jaxpr)


def loss(x):
    return jnp.mean(jnp.tanh(x @ x.T))


# ---------------------------------------------------------------- equal cases


def test_recreated_jit_grad_and_value_and_grad():
    assert D(jax.jit(jax.grad(loss)), X) == D(jax.jit(jax.grad(loss)), X)
    assert D(jax.value_and_grad(loss), X) == D(jax.value_and_grad(loss), X)
    assert D(jax.grad(loss), X) != D(jax.value_and_grad(loss), X)


@pytest.mark.parametrize("policy", [None, jax.checkpoint_policies.dots_saveable])
def test_recreated_checkpoint(policy):
    a = D(jax.grad(jax.checkpoint(loss, policy=policy)), X)
    b = D(jax.grad(jax.checkpoint(loss, policy=policy)), X)
    assert a == b


def test_recreated_jit_jit():
    assert D(jax.jit(jax.jit(loss)), X) == D(jax.jit(jax.jit(loss)), X)


def test_same_lambda_on_two_lines():
    f = lambda x: jnp.sin(x) * 2.0  # noqa: E731
    g = lambda x: jnp.sin(x) * 2.0  # noqa: E731
    assert D(f, X) == D(g, X)
    assert _canon.canonical_text(jax.make_jaxpr(f)(X)) == _canon.canonical_text(
        jax.make_jaxpr(g)(X)
    )


def test_recreated_partial():
    def f(x, k):
        return x * k

    assert D(functools.partial(f, k=1), X) == D(functools.partial(f, k=1), X)
    assert D(functools.partial(f, k=1), X) != D(functools.partial(f, k=2), X)


def test_different_names_same_body():
    def alpha(x):
        return jnp.cos(x) + 1

    def beta(x):
        return jnp.cos(x) + 1

    # Also nested: the inner jit's `name` param differs.
    assert D(alpha, X) == D(beta, X)
    assert D(lambda x: jax.jit(alpha)(x) * 2, X) == D(lambda x: jax.jit(beta)(x) * 2, X)


def _make_custom_vjp():
    @jax.custom_vjp
    def f(x):
        return jnp.sin(x)

    f.defvjp(lambda x: (jnp.sin(x), jnp.cos(x)), lambda c, g: (g * c,))
    return f


def test_recreated_grad_of_custom_vjp():
    f1, f2 = _make_custom_vjp(), _make_custom_vjp()
    assert D(jax.grad(lambda x: f1(x).sum()), X) == D(jax.grad(lambda x: f2(x).sum()), X)
    # The primal alone keeps a custom_vjp_call eqn; its fwd/bwd thunks are skipped.
    assert D(lambda x: f1(x).sum(), X) == D(lambda x: f2(x).sum(), X)


def test_custom_jvp_rule_does_not_matter_for_primal():
    def make(scale):
        @jax.custom_jvp
        def f(x):
            return jnp.sin(x)

        f.defjvp(lambda p, t: (f(p[0]), scale * t[0]))
        return f

    a, b = make(1.0), make(2.0)
    assert D(lambda x: a(x).sum(), X) == D(lambda x: b(x).sum(), X)
    # ...but under grad the rule is explicit and does matter.
    assert D(jax.grad(lambda x: a(x).sum()), X) != D(jax.grad(lambda x: b(x).sum()), X)


_SUBPROC = textwrap.dedent(
    """
    import jax, jax.numpy as jnp
    from pcache import _canon
    def loss(x):
        return jnp.mean(jnp.tanh(x @ x.T)) + jnp.sum(jnp.where(x > 0, x, 0.5))
    cj = jax.jit(jax.grad(jax.checkpoint(loss))).trace(jnp.ones((4, 4))).jaxpr
    print("DIGEST", _canon.jaxpr_digest(cj).hex())
    """
)


def _subprocess_digest(extra_env: dict[str, str]) -> str:
    env = {**os.environ, **extra_env}
    out = subprocess.run(
        [sys.executable, "-c", _SUBPROC], env=env, capture_output=True, text=True, check=True
    ).stdout
    return next(ln.split()[1] for ln in out.splitlines() if ln.startswith("DIGEST"))


def test_stable_across_processes_and_hash_seeds():
    digests = {_subprocess_digest({"PYTHONHASHSEED": s}) for s in ("0", "1", "12345")}
    assert len(digests) == 1
    x64 = _subprocess_digest({"PYTHONHASHSEED": "0", "JAX_ENABLE_X64": "1"})
    assert x64 not in digests


# ---------------------------------------------------------------- different cases


def test_dtype_weak_type_shape():
    f = lambda x: x * 2  # noqa: E731
    assert D(f, X) != D(f, X.astype(jnp.bfloat16))
    assert D(f, 1.0) != D(f, jnp.float32(1.0))  # weak-typed Python scalar vs array
    assert D(f, X) != D(f, jnp.ones((4, 5)))


def test_literal_value_bit_exact():
    assert D(lambda x: x * 2.0, X) != D(lambda x: x * 3.0, X)
    assert D(lambda x: x + 0.0, X) != D(lambda x: x + -0.0, X)
    nan1 = np.frombuffer(np.uint32(0x7FC00000).tobytes(), np.float32)[0]
    nan2 = np.frombuffer(np.uint32(0x7FC00001).tobytes(), np.float32)[0]
    assert D(lambda x: x + nan1, X) != D(lambda x: x + nan2, X)


def test_closed_over_constant_value():
    c1, c2 = np.arange(16.0).reshape(4, 4), np.arange(16.0).reshape(4, 4) + 1
    assert D(lambda x: x + c1, X) == D(lambda x: x + c1.copy(), X)
    assert D(lambda x: x + c1, X) != D(lambda x: x + c2, X)
    j1, j2 = jnp.asarray(c1), jnp.asarray(c2)
    assert D(lambda x: x @ j1, X) != D(lambda x: x @ j2, X)


def test_grad_argnums_axis_precision():
    f = lambda x, y: jnp.sum(x * y**2)  # noqa: E731
    assert D(jax.grad(f, argnums=0), X, X) != D(jax.grad(f, argnums=1), X, X)
    assert D(lambda x: x.sum(0), X) != D(lambda x: x.sum(1), X)
    assert D(lambda x: jnp.dot(x, x, precision="highest"), X) != D(
        lambda x: jnp.dot(x, x, precision="default"), X
    )
    assert D(lambda x: jnp.dot(x, x, precision="highest"), X) == D(
        lambda x: jnp.dot(x, x, precision=jax.lax.Precision.HIGHEST), X
    )


def test_remat_policy():
    pol = jax.checkpoint_policies
    a = D(jax.grad(jax.checkpoint(loss, policy=pol.dots_saveable)), X)
    b = D(jax.grad(jax.checkpoint(loss, policy=pol.nothing_saveable)), X)
    assert a != b
    # Forward-only: the remat2 eqn differs only by its policy param; still keyed.
    fa = D(jax.checkpoint(loss, policy=pol.dots_saveable), X)
    fb = D(jax.checkpoint(loss, policy=pol.nothing_saveable), X)
    assert fa != fb


def test_x64_context():
    f = lambda x: x + 1  # noqa: E731
    a = D(f, np.ones(3))
    with jax.enable_x64(True):
        b = D(f, np.ones(3))
    assert a != b


def test_pure_callbacks_are_slots_in_the_key():
    """A host callback's function is bound into the executable at load, from the
    call's own lowering: the key names the slot (result avals, ...), not the function."""

    def cb1(a):
        return a

    def cb2(a):
        return a * 2

    def prog(cb, shape=X.shape):
        return lambda x: jax.pure_callback(cb, jax.ShapeDtypeStruct(shape, x.dtype), x)

    f1 = _canon.jaxpr_fingerprint(jax.make_jaxpr(prog(cb1))(X))
    f2 = _canon.jaxpr_fingerprint(jax.make_jaxpr(prog(cb2))(X))
    assert f1.digest == f2.digest and f1.persistent and f2.persistent
    other = _canon.jaxpr_fingerprint(jax.make_jaxpr(prog(cb1, (X.size,)))(X))
    assert other.digest != f1.digest


def test_unknown_param_type_is_uncacheable():
    class Opaque:
        pass

    p = Primitive("pcache_test_opaque")
    p.def_abstract_eval(lambda x, **_: x)
    cj = jax.make_jaxpr(lambda x: p.bind(x, thing=Opaque()))(X)
    with pytest.raises(Uncacheable) as ei:
        _canon.jaxpr_digest(cj)
    assert ei.value.reason.startswith("unknown-param:pcache_test_opaque.thing:")
    assert "Opaque" in ei.value.reason
    # A callable in a non-callback primitive is not keyed by identity either.
    cj2 = jax.make_jaxpr(lambda x: p.bind(x, fn=lambda: 0))(X)
    with pytest.raises(Uncacheable):
        _canon.jaxpr_digest(cj2)


def test_control_flow_subjaxprs():
    c1 = lambda x: jax.lax.cond(x.sum() > 0, jnp.sin, jnp.cos, x)  # noqa: E731
    c2 = lambda x: jax.lax.cond(x.sum() > 0, jnp.sin, jnp.tan, x)  # noqa: E731
    assert D(c1, X) != D(c2, X)
    s1 = lambda x: jax.lax.scan(lambda c, a: (c + a, c), x[0], x)  # noqa: E731
    s2 = lambda x: jax.lax.scan(lambda c, a: (c * a, c), x[0], x)  # noqa: E731
    assert D(s1, X) == D(lambda x: jax.lax.scan(lambda c, a: (c + a, c), x[0], x), X)
    assert D(s1, X) != D(s2, X)
    w1 = lambda x: jax.lax.fori_loop(0, 3, lambda i, c: c * 2, x)  # noqa: E731
    w2 = lambda x: jax.lax.fori_loop(0, 4, lambda i, c: c * 2, x)  # noqa: E731
    assert D(w1, X) != D(w2, X)


def test_canonical_text_matches_digest_and_is_readable():
    cj = jax.make_jaxpr(jax.grad(loss))(X)
    t = _canon.canonical_text(cj)
    assert '"dot_general"' in t and "0x" not in t
    assert _canon.canonical_text(jax.make_jaxpr(jax.grad(loss))(X)) == t


def test_memo_reuses_inner_jaxpr_digests():
    inner = jax.jit(loss)
    cj = jax.make_jaxpr(lambda x: inner(x) + 1)(X)
    d1 = _canon.jaxpr_digest(cj)
    assert _canon._JAXPR_MEMO.get(cj) is not None
    assert _canon.jaxpr_digest(cj) == d1
    _canon.clear_caches()
    assert _canon.jaxpr_digest(cj) == d1


# ---------------------------------------------------------------- values


def test_value_digest_shardings():
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    devs = jax.devices()
    assert len(devs) == 8
    m1 = jax.make_mesh((8,), ("x",))
    m2 = jax.make_mesh((2, 4), ("x", "y"))
    vd = _canon.value_digest
    assert vd(NamedSharding(m1, P("x"))) == vd(NamedSharding(jax.make_mesh((8,), ("x",)), P("x")))
    assert vd(NamedSharding(m1, P("x"))) != vd(NamedSharding(m1, P()))
    assert vd(NamedSharding(m2, P("x"))) != vd(NamedSharding(m2, P("y")))
    assert vd(NamedSharding(m2, P("x", "y"))) != vd(NamedSharding(m2, P(("x", "y"))))
    m3 = jax.sharding.Mesh(np.array(devs[::-1]).reshape(8), ("x",))
    assert vd(NamedSharding(m1, P("x"))) != vd(NamedSharding(m3, P("x")))
    assert vd(jax.sharding.SingleDeviceSharding(devs[0])) != vd(
        jax.sharding.SingleDeviceSharding(devs[1])
    )


def test_value_digest_scalars_are_type_tagged():
    vd = _canon.value_digest
    vals = [0, 1, True, False, 0.0, -0.0, 1.0, "1", b"1", None, (1,), [1], {1: 2}, frozenset({1})]
    assert len({vd(v) for v in vals}) == len(vals)
    assert vd({"b": 1, "a": 2}) == vd({"a": 2, "b": 1})
    assert vd(frozenset({"a", "b"})) == vd(frozenset({"b", "a"}))
    assert vd(np.float32(1)) != vd(np.float64(1))
    assert vd(jax.lax.Precision.HIGHEST) != vd(jax.lax.Precision.DEFAULT)
    with pytest.raises(Uncacheable):
        vd(object())
    with pytest.raises(Uncacheable):
        vd(lambda: 0)


def test_environment_parts():
    backend = jax.devices()[0].client
    parts = dict(_key.environment_parts(backend))
    assert {"jax", "jaxlib", "platform", "xla_flags", "trace_context"} <= parts.keys()
    assert b"xla_force_host_platform_device_count" not in parts["xla_flags"]
    before = parts["trace_context"]
    with jax.default_matmul_precision("highest"):
        during = dict(_key.environment_parts(backend))["trace_context"]
    assert during != before
    assert dict(_key.environment_parts(backend))["trace_context"] == before
    with jax.enable_x64(True):
        assert dict(_key.environment_parts(backend))["trace_context"] != before


# ---------------------------------------------------------------- keys


def test_cache_key():
    def part(obj):
        return _canon.value_digest(obj).hex()

    k1 = CacheKey((("a", part(b"x")), ("b", part((1, 2)))))
    k2 = CacheKey((("a", part(b"x")), ("b", part((1, 3)))))
    k3 = CacheKey((("a", part(b"x")), ("b", part((1, 2)))))
    assert k1.digest == k3.digest and k1.digest != k2.digest
    assert k1.diff(k2) == ["b"] and k1.diff(k3) == []
    assert "a" in k1.describe() and k1.digest in k1.describe()
    # Names are length-prefixed: ("ab", p) and ("a", "b" + p) never collide.
    h = part(0)
    assert CacheKey((("ab", h),)).digest != CacheKey((("a", "62" + h[2:]),)).digest


def test_jax_sentinels_have_a_canonical_form():
    """vmap's `no_axis_name` sentinel and debug_callback's effect singletons are
    encoded by what they are, not by identity (issue 12, item 2)."""
    from jax._src import core, debugging

    from pcache import _compat

    assert _canon.canonicalize(_compat.no_axis_name) == _canon.canonicalize(core.no_axis_name)
    assert _canon.canonicalize(core.no_axis_name) != _canon.canonicalize(None)
    plain, ordered = debugging.debug_effect, debugging.ordered_debug_effect
    assert _canon.canonicalize(plain) != _canon.canonicalize(ordered)
