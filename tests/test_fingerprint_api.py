"""End-to-end key behaviour through the public ``pcache.fingerprint(fun, *args)``."""

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
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import pcache

X = jnp.ones((8, 4), jnp.float32)
fp = pcache.fingerprint


def loss(x):
    return jnp.mean(jnp.tanh(x @ x.T))


def _cv():
    @jax.custom_vjp
    def f(x):
        return jnp.sin(x)

    f.defvjp(lambda x: (jnp.sin(x), jnp.cos(x)), lambda c, g: (g * c,))
    return f


def _named(name):
    def f(x):
        return jnp.cos(x) + 1

    f.__name__ = f.__qualname__ = name
    return f


def _k(x, k):
    return x * k


EQUAL_CASES = {
    "jit(grad(f))": lambda: jax.jit(jax.grad(loss)),
    "value_and_grad": lambda: jax.value_and_grad(loss),
    "checkpoint": lambda: jax.grad(jax.checkpoint(loss)),
    "checkpoint+policy": lambda: jax.grad(
        jax.checkpoint(loss, policy=jax.checkpoint_policies.dots_saveable)
    ),
    "jit(jit(f))": lambda: jax.jit(jax.jit(loss)),
    "partial": lambda: functools.partial(_k, k=1),
    "grad(custom_vjp)": lambda: jax.grad(lambda x: _cv()(x).sum()),
}


@pytest.mark.parametrize("name", sorted(EQUAL_CASES))
def test_recreated_equal(name):
    make = EQUAL_CASES[name]
    assert fp(make(), X) == fp(make(), X)


def test_lambda_on_two_lines_and_different_names():
    f = lambda x: jnp.sin(x) * 2.0  # noqa: E731
    g = lambda x: jnp.sin(x) * 2.0  # noqa: E731
    assert fp(f, X) == fp(g, X)
    assert fp(_named("alpha"), X) == fp(_named("beta"), X)


_SUB = textwrap.dedent(
    """
    import jax, jax.numpy as jnp, pcache
    print("FP", pcache.fingerprint(jax.jit(jax.grad(lambda x: jnp.mean(x @ x.T))), jnp.ones((4, 4))))
    """
)


def _sub_fp(env):
    out = subprocess.run(
        [sys.executable, "-c", _SUB],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return next(ln.split()[1] for ln in out.splitlines() if ln.startswith("FP"))


def test_subprocesses_hash_seeds_and_x64():
    seeds = {_sub_fp({"PYTHONHASHSEED": s}) for s in ("0", "1", "999")}
    assert len(seeds) == 1
    assert _sub_fp({"PYTHONHASHSEED": "0", "JAX_ENABLE_X64": "1"}) not in seeds


def test_different():
    f = lambda x: x * 2  # noqa: E731
    assert fp(f, X) != fp(f, X.astype(jnp.bfloat16))
    assert fp(f, 1.0) != fp(f, jnp.float32(1.0))
    assert fp(f, X) != fp(f, jnp.ones((4, 8)))
    assert fp(lambda x: x * 2.0, X) != fp(lambda x: x * 3.0, X)
    c1, c2 = np.ones((8, 4)), np.zeros((8, 4))
    assert fp(lambda x: x + c1, X) != fp(lambda x: x + c2, X)
    g = lambda x, y: jnp.sum(x * y**2)  # noqa: E731
    assert fp(jax.grad(g, argnums=0), X, X) != fp(jax.grad(g, argnums=1), X, X)
    assert fp(lambda x: x.sum(0), X) != fp(lambda x: x.sum(1), X)
    assert fp(lambda x: jnp.dot(x, x.T, precision="highest"), X) != fp(
        lambda x: jnp.dot(x, x.T, precision="default"), X
    )
    pol = jax.checkpoint_policies
    assert fp(jax.grad(jax.checkpoint(loss, policy=pol.dots_saveable)), X) != fp(
        jax.grad(jax.checkpoint(loss, policy=pol.nothing_saveable)), X
    )


def test_static_argument_and_donation():
    h = jax.jit(lambda x, k: x * k, static_argnums=1)
    assert fp(h, X, 2) == fp(jax.jit(lambda x, k: x * k, static_argnums=1), X, 2)
    assert fp(h, X, 2) != fp(h, X, 3)
    assert fp(jax.jit(loss), X) != fp(jax.jit(loss, donate_argnums=0), X)


def test_sharding():
    mesh = jax.make_mesh((8,), ("x",), axis_types=(jax.sharding.AxisType.Auto,))
    a = jax.device_put(X, NamedSharding(mesh, P("x")))
    b = jax.device_put(X, NamedSharding(mesh, P()))
    assert fp(jax.jit(loss), a) != fp(jax.jit(loss), b)
    ja = jax.jit(loss, in_shardings=NamedSharding(mesh, P("x")))
    jb = jax.jit(loss, in_shardings=NamedSharding(mesh, P()))
    assert fp(ja, X) != fp(jb, X)


def test_default_matmul_precision():
    f = lambda x: x @ x.T  # noqa: E731
    base = fp(f, X)
    with jax.default_matmul_precision("highest"):
        high = fp(f, X)
    assert base != high
    assert fp(f, X) == base


def test_pure_callbacks():
    """The key of a callback program names its callback slots, not the functions:
    the executable is bound to the calling program's own functions on every hit."""

    def cb1(a):
        return a

    def cb2(a):
        return a * 2

    def prog(cb):
        return lambda x: jax.pure_callback(cb, jax.ShapeDtypeStruct(x.shape, x.dtype), x)

    one = pcache.key(prog(cb1), X)
    assert one.persistent and one.digest == fp(prog(cb2), X)
