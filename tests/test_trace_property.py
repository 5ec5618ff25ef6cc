"""Trace reuse against stock JAX on generated callables and mutations.

Hypothesis builds captured values (floats with NaN payloads and signed zeros,
nested containers, numpy arrays and scalars of many dtypes, frozen dataclasses,
enums) and a sequence of steps; each step re-creates a jit whose trace depends on
the captured value (and on a module attribute changed between steps), and the
results must be bitwise those of stock JAX.
"""

from __future__ import annotations

import dataclasses
import enum
import math
import struct
import types

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pcache

X = jnp.arange(1.0, 5.0, dtype=jnp.float32)
MOD = types.ModuleType("pcache_prop_mod")  # a user module whose attribute changes
MOD.k = 1.0


class Color(enum.Enum):
    RED = 1.0
    BLUE = -1.0


@dataclasses.dataclass(frozen=True)
class Pair:
    a: object
    b: object


def _float_bits(bits: int) -> float:
    return struct.unpack("<d", struct.pack("<Q", bits))[0]


floats = st.one_of(
    st.sampled_from([0.0, -0.0, float("inf"), -float("inf"), float("nan"), -float("nan")]),
    st.integers(0, 2**64 - 1).map(_float_bits),  # every NaN payload included
    st.floats(-4, 4),
)
_DTYPES = [np.float32, np.float16, np.int8, np.uint8, ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn]
numpy_values = st.builds(
    lambda dt, raw: np.frombuffer(raw * 8, np.uint8)[: 4 * np.dtype(dt).itemsize].view(dt),
    st.sampled_from(_DTYPES),
    st.binary(min_size=1, max_size=1),
)
leaves = st.one_of(
    floats,
    st.integers(-3, 3),
    st.booleans(),
    st.sampled_from(list(Color)),
    numpy_values,
    numpy_values.map(lambda a: a[0]),  # numpy scalars
)
values = st.recursive(
    leaves,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.lists(inner, max_size=3).map(tuple),
        st.dictionaries(st.sampled_from("abc"), inner, max_size=3),
        st.builds(Pair, inner, inner),
    ),
    max_leaves=6,
)


def _scalar(v) -> float:
    """A number that depends on every bit of ``v`` the trace could see."""
    if isinstance(v, Color):
        return v.value
    if isinstance(v, Pair):
        return _scalar(v.a) * 3 + _scalar(v.b)
    if isinstance(v, dict):
        return sum((i + 1) * _scalar(x) for i, x in enumerate(v.values())) + len(v)
    if isinstance(v, (list, tuple)):
        return sum((i + 1) * _scalar(x) for i, x in enumerate(v)) + 2 * len(v) + isinstance(v, list)
    if isinstance(v, (np.ndarray, np.generic)):
        h = float(int.from_bytes(np.asarray(v).tobytes()[:6], "little") % 9973)
        return h + len(str(np.asarray(v).dtype))
    if isinstance(v, float):
        if math.isnan(v):  # its sign and payload
            return float(struct.unpack("<Q", struct.pack("<d", v))[0] % 9973)
        return math.copysign(1.0, v) * min(abs(v), 1e6)
    return float(v) + 0.5 * isinstance(v, bool)


def _make(v):
    return jax.jit(lambda x: x * _scalar(v) + MOD.k)


def _run(steps) -> list:
    out = []
    for v, k in steps:
        MOD.k = k
        out.append(np.asarray(_make(v)(X)).tobytes())
    MOD.k = 1.0
    return out


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    st.lists(
        st.tuples(values, st.sampled_from([1.0, 2.0, -0.0])),
        min_size=2,
        max_size=5,
    ).flatmap(lambda s: st.permutations(s + s[:2]))  # values seen again: reuses
)
def test_generated_callables_and_mutations_match_stock(tmp_path_factory, steps):
    stock = _run(steps)
    with pcache.enabled(tmp_path_factory.mktemp("c"), check=False):
        cached = _run(steps)
    assert cached == stock
