"""Property: over random small programs, digests are equal exactly when canonical
texts are equal (no collision, no spurious difference)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pcache import _canon

UNARY = [jnp.sin, jnp.cos, jnp.tanh, jnp.exp, jnp.abs, jnp.negative, jnp.sqrt]
BINARY = [jnp.add, jnp.subtract, jnp.multiply, jnp.maximum, jnp.minimum]
SHAPES = [(2, 3), (3, 3), (2, 2)]
DTYPES = [jnp.float32, jnp.bfloat16]

# One op: (kind, args). Programs are lists of ops applied to a running value x.
op = st.one_of(
    st.tuples(st.just("un"), st.integers(0, len(UNARY) - 1)),
    st.tuples(
        st.just("bin_lit"), st.integers(0, len(BINARY) - 1), st.sampled_from([0.0, -0.0, 1.0, 2.5])
    ),
    st.tuples(st.just("bin_self"), st.integers(0, len(BINARY) - 1)),
    st.tuples(st.just("reduce"), st.sampled_from([0, 1]), st.booleans()),
    st.tuples(st.just("matmul_t"), st.booleans()),
    st.tuples(st.just("transpose")),
    st.tuples(st.just("where"), st.sampled_from([0.0, 1.0])),
    st.tuples(st.just("cond"), st.integers(0, len(UNARY) - 1), st.integers(0, len(UNARY) - 1)),
    st.tuples(st.just("scan"), st.integers(0, len(BINARY) - 1)),
)
program = st.tuples(
    st.sampled_from(SHAPES), st.sampled_from(DTYPES), st.lists(op, min_size=1, max_size=5)
)


def _apply(ops, x):
    for o in ops:
        kind = o[0]
        if kind == "un":
            x = UNARY[o[1]](x)
        elif kind == "bin_lit":
            x = BINARY[o[1]](x, o[2])
        elif kind == "bin_self":
            x = BINARY[o[1]](x, x)
        elif kind == "reduce":
            x = jnp.sum(x, axis=o[1] % x.ndim, keepdims=True) if x.ndim else x
            if o[2]:
                x = jnp.broadcast_to(x, (2, 2)) if x.size == 1 else x
        elif kind == "matmul_t" and x.ndim == 2:
            x = x @ x.T if o[1] else x.T @ x
        elif kind == "transpose" and x.ndim == 2:
            x = x.T
        elif kind == "where":
            x = jnp.where(x > o[1], x, o[1])
        elif kind == "cond":
            a, b = UNARY[o[1]], UNARY[o[2]]
            x = jax.lax.cond(jnp.sum(x) > 0, a, b, x)
        elif kind == "scan" and x.ndim == 2:
            f = BINARY[o[1]]
            x = jax.lax.scan(lambda c, r, f=f: (f(c, r), c), x[0], x)[1]
    return x


_SEEN: dict[bytes, str] = {}
_TEXTS: dict[str, bytes] = {}


@settings(
    max_examples=1200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    database=None,
)
@given(program)
def test_digest_equal_iff_text_equal(prog):
    shape, dtype, ops = prog
    x = jnp.ones(shape, dtype)
    cj = jax.make_jaxpr(lambda a: _apply(ops, a))(x)
    d = _canon.jaxpr_digest(cj)
    t = _canon.canonical_text(cj)
    # A re-traced copy (fresh objects) gives the same digest.
    assert _canon.jaxpr_digest(jax.make_jaxpr(lambda a: _apply(ops, a))(x)) == d
    if d in _SEEN:
        assert _SEEN[d] == t, "digest collision between different canonical texts"
    else:
        _SEEN[d] = t
    if t in _TEXTS:
        assert _TEXTS[t] == d, "equal canonical texts with different digests"
    else:
        _TEXTS[t] = d


def test_property_run_saw_many_distinct_programs():
    # Runs after the property test in file order; guards against a grammar that
    # degenerates into a handful of programs.
    if not _SEEN:
        return
    assert len(_SEEN) > 200
