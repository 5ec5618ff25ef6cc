"""Closed jaxprs as data and back (`pcache._compat.jaxpr_codec`, issue 27 phase 1).

A decoded jaxpr must have the digest of the one encoded (the executable key is
found from it) and evaluate bitwise like it; what has no encoding is refused by
name; a damaged or hostile entry decodes to `Undecodable`, never to another error
and never by running code it names."""

from __future__ import annotations

import copy
import json
import sys

import hypothesis.strategies as st
import jax
import jax.extend
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from pcache import _canon, _compat
from pcache._canon_values import jax_primitives_by_name

pytestmark = pytest.mark.skipif(not _compat.JIT_SEAM or _compat.LINE_09, reason="JAX 0.10 line")
if _compat.JIT_SEAM and not _compat.LINE_09:
    from pcache._compat import jaxpr_codec as C

X = jnp.linspace(-1.0, 1.0, 64, dtype=jnp.float32).reshape(8, 8)
PARAMS = [(X, X[0]), (X.T, X[1])]


def f_loss(x):
    return jnp.mean(x @ x.T)


def mlp_loss(params, x):
    for w, b in params:
        x = jnp.tanh(x @ w + b)
    return jnp.mean(x**2)


PROGRAMS = {
    "grad": (lambda: jax.jit(jax.grad(f_loss)), (X,)),
    "remat": (lambda: jax.jit(jax.grad(jax.checkpoint(mlp_loss))), (PARAMS, X)),
    "scan": (lambda: jax.jit(lambda x: jax.lax.scan(lambda c, a: (c + a, c * a), x[0], x)), (X,)),
    "cond": (lambda: jax.jit(lambda x: jax.lax.cond(x.sum() > 0, jnp.sin, jnp.cos, x)), (X,)),
    "while": (
        lambda: jax.jit(
            lambda x: jax.lax.while_loop(
                lambda c: c[0] < 5, lambda c: (c[0] + 1, c[1] * 1.5), (0, x)
            )
        ),
        (X,),
    ),
    "vmap": (lambda: jax.jit(jax.vmap(jax.value_and_grad(f_loss))), (jnp.stack([X, X + 1]),)),
    "scatter": (lambda: jax.jit(lambda x: x.at[jnp.array([1, 2])].set(3.0)[jnp.array([0])]), (X,)),
    "conv": (
        lambda: jax.jit(
            lambda x: jax.lax.conv(x[None, None], x[None, None, :3, :3], (1, 1), "SAME")
        ),
        (X,),
    ),
    "ints": (lambda: jax.jit(lambda x: (x * 3 + 1).astype(jnp.int32) // 2 % 5), (X,)),
    "legacy_key": (lambda: jax.jit(lambda k: jax.random.normal(jax.random.PRNGKey(k), (3,))), (1,)),
    "typed_key": (lambda: jax.jit(lambda k: jax.random.normal(jax.random.key(k), (3,))), (1,)),
    "numpy_const": (lambda: jax.jit(lambda x: x + np.arange(8.0, dtype=np.float32)), (X,)),
    "nan_literal": (lambda: jax.jit(lambda x: jnp.where(x > 0, x, -jnp.nan) * -0.0), (X,)),
}


def _roundtrip(cj):
    text = json.dumps(C.encode(cj), allow_nan=False)  # plain JSON: no NaN, no objects
    back = C.decode(json.loads(text), jax_primitives_by_name())
    assert back.standins == ('"SI"' in text or '"SO"' in text)
    return back.closed, text


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_a_decoded_jaxpr_has_the_digest_and_the_results_of_the_encoded(name):
    make, args = PROGRAMS[name]
    cj = make().trace(*args).jaxpr
    back, _ = _roundtrip(cj)
    assert _canon.jaxpr_digest(back) == _canon.jaxpr_digest(cj)
    assert _canon.canonical_text(back) == _canon.canonical_text(cj)
    flat = jax.tree_util.tree_leaves(args)
    want = jax.core.eval_jaxpr(cj.jaxpr, cj.consts, *flat)
    got = jax.core.eval_jaxpr(back.jaxpr, back.consts, *flat)
    assert [np.asarray(a).tobytes() for a in got] == [np.asarray(a).tobytes() for a in want]


def test_one_sub_jaxpr_met_twice_is_one_object_after_decoding():
    cj = jax.jit(lambda x: jax.lax.cond(x.sum() > 0, jnp.sin, jnp.sin, x)).trace(X).jaxpr
    branches = next(e for e in cj.jaxpr.eqns if e.primitive.name == "cond").params["branches"]
    back, _ = _roundtrip(cj)
    got = next(e for e in back.jaxpr.eqns if e.primitive.name == "cond").params["branches"]
    assert (branches[0].jaxpr is branches[1].jaxpr) == (got[0].jaxpr is got[1].jaxpr)


CAPTURED_WEAK = jnp.asarray(2.0)  # (weakly typed: nothing but its values is stored)


@jax.custom_jvp
def _g(x):
    return jnp.sin(x)


_g.defjvp(lambda p, t: (_g(p[0]), t[0]))


@pytest.mark.parametrize(
    "fn, reason",
    [
        (
            lambda x: jax.pure_callback(
                lambda a: np.asarray(a) * 2, jax.ShapeDtypeStruct((3,), jnp.float32), x
            ),
            "pure_callback.callback:not-library-code",
        ),
        (lambda x: x + CAPTURED_WEAK, "constant:ArrayImpl"),
        (lambda x: (jax.debug.print("{}", x), x)[1], "jaxpr:Jaxpr:effects=True"),
        (
            lambda x: jax.lax.with_sharding_constraint(
                x, jax.sharding.SingleDeviceSharding(jax.devices()[0])
            ),
            "sharding_constraint.sharding:jax.sharding.SingleDeviceSharding",
        ),
    ],
    ids=["callback", "captured-array", "effects", "sharding"],
)
def test_what_has_no_encoding_is_refused_by_name(fn, reason):
    cj = jax.jit(fn).trace(jnp.ones(3, jnp.float32)).jaxpr
    with pytest.raises(C.Unencodable) as e:
        C.encode(cj)
    assert e.value.reason == reason


@jax.custom_vjp
def _clip(x):
    return x


_clip.defvjp(lambda x: (x, None), lambda _, g: (jnp.clip(g, -1.0, 1.0),))


def _custom(x):
    return jnp.sum(jax.nn.relu(_g(_clip(x * 3.0))) ** 2)


def test_custom_derivative_rules_are_stored_as_stand_ins_that_refuse_to_run():
    """A custom_jvp's jvp thunk and a custom_vjp's fwd, bwd and output-trees thunks
    are stored by name only: the decoded jaxpr has the digest and, run, the results
    of the traced one; differentiating it reaches a stand-in, which raises (why a
    trace holding them is only served to a top-level dispatch: `test_trace_persist`)."""
    cj = jax.jit(_custom).trace(X).jaxpr
    back, text = _roundtrip(cj)
    assert '"SI"' in text and '"SO"' in text
    assert _canon.jaxpr_digest(back) == _canon.jaxpr_digest(cj)
    want = jax.core.eval_jaxpr(cj.jaxpr, cj.consts, X)
    got = jax.core.eval_jaxpr(back.jaxpr, back.consts, X)
    assert [np.asarray(a).tobytes() for a in got] == [np.asarray(a).tobytes() for a in want]
    lowered = jax.jit(jax.extend.core.jaxpr_as_fun(back)).lower(X).as_text()
    assert "stablehlo" in lowered
    with pytest.raises(C.StandInCalled):
        jax.grad(lambda x: jax.extend.core.jaxpr_as_fun(back)(x)[0])(X)
    with pytest.raises(C.StandInCalled):
        jax.jvp(jax.extend.core.jaxpr_as_fun(back), (X,), (X,))


def test_stand_ins_decode_only_where_a_custom_derivative_rule_stood():
    """A stand-in's tag in any other param, another value in a rule's place, or an
    entry whose stand-in flag disagrees with what it holds: all undecodable."""
    data = C.encode(jax.jit(_custom).trace(X).jaxpr)
    prims = jax_primitives_by_name()
    assert C.decode(data, prims).standins

    def eqn_with(d, key):
        return next(e for j in d["jaxprs"] for e in j["eqns"] if key in e[3])

    for edit in [
        lambda d: eqn_with(d, "num_consts")[3].__setitem__("num_consts", ["SO"]),
        lambda d: eqn_with(d, "jvp_jaxpr_fun")[3].__setitem__("jvp_jaxpr_fun", None),
        lambda d: eqn_with(d, "bwd")[3].__setitem__("bwd", ["SO"]),
        lambda d: eqn_with(d, "out_trees")[3].__setitem__("out_trees", ["SI", "a", "b"]),
        lambda d: eqn_with(d, "bwd")[3].__setitem__("bwd", ["SI", 1, "b"]),
        lambda d: d.__setitem__("standins", False),
    ]:
        bad = copy.deepcopy(data)
        edit(bad)
        with pytest.raises(C.Undecodable):
            C.decode(bad, prims)
    plain = C.encode(jax.jit(f_loss).trace(X).jaxpr)
    assert not plain["standins"]
    with pytest.raises(C.Undecodable):
        C.decode({**plain, "standins": True}, prims)


def test_a_jax_array_a_trace_made_is_stored_by_value_and_rebuilt_uncommitted():
    """A JAX array constant a trace made (under ``ensure_compile_time_eval``, in an
    inner jit) is stored by value and decoded to an uncommitted array on the default
    device: the same digest and results; a committed or weakly typed one: refused."""

    def made(v):
        with jax.ensure_compile_time_eval():
            k = jnp.arange(8.0, dtype=jnp.float32) * 2
        return jax.lax.scan(lambda s, _: (jax.jit(lambda y: y + k)(s), None), v, None, length=2)[0]

    cj = jax.jit(made).trace(X[0]).jaxpr
    back, text = _roundtrip(cj)
    assert '"JA"' in text
    assert _canon.jaxpr_digest(back) == _canon.jaxpr_digest(cj)
    got = jax.core.eval_jaxpr(back.jaxpr, back.consts, X[0])
    assert np.asarray(got[0]).tobytes() == np.asarray(jax.jit(made)(X[0])).tobytes()
    for const in (jax.device_put(jnp.arange(3.0), jax.devices()[0]), jnp.asarray(2.0)):
        cj = jax.jit(lambda v, c=const: jax.jit(lambda y: y + c)(v)).trace(jnp.ones(3)).jaxpr
        with pytest.raises(C.Unencodable, match="constant:ArrayImpl"):
            C.encode(cj)


def test_names_off_the_tables_are_refused():
    data = C.encode(jax.jit(jax.grad(f_loss)).trace(X).jaxpr)
    prims = jax_primitives_by_name()
    for edit in [
        lambda d: d["prims"].__setitem__(0, "os:system"),
        lambda d: d["avals"][0].__setitem__(2, "object"),
        lambda d: d["avals"][0].__setitem__(2, ["key", "no-such-impl"]),
        lambda d: d["jaxprs"][0]["eqns"][0].__setitem__(0, len(d["prims"])),
        lambda d: d["jaxprs"][0]["eqns"][0].__setitem__(0, -1),
        lambda d: d["jaxprs"][0]["eqns"][0].__setitem__(4, True),
        lambda d: d["jaxprs"][0]["invars"].__setitem__(0, -1),
        lambda d: d["jaxprs"][0]["outvars"].__setitem__(0, 10_000),
        lambda d: d["root"].__setitem__(1, 7),
        lambda d: d.__setitem__("format", 1),
        lambda d: d["closeds"][0].__setitem__(0, 10_000),
        lambda d: d.__setitem__("root", ["CJ", -1]),
    ]:
        bad = copy.deepcopy(data)
        edit(bad)
        with pytest.raises(C.Undecodable):
            C.decode(bad, prims)


def test_a_closed_jaxpr_met_twice_decodes_to_one_object():
    """An inner jit called twice is one `ClosedJaxpr` in both calls' params: JAX
    lowers one function for it, and the module (which keys the executable of a
    program holding a library primitive) must be the first process's. Two equal
    but distinct objects stay two."""
    inner = jax.jit(lambda a: jnp.where(a > 0, a, 0.0))
    other = jax.jit(lambda a: jnp.where(a > 0, a, 0.0))
    closed = jax.jit(lambda a: inner(a) + inner(a * 2.0) + other(a)).trace(X).jaxpr
    back = C.decode(C.encode(closed), jax_primitives_by_name()).closed
    calls = [e.params["jaxpr"] for e in closed.jaxpr.eqns if "jaxpr" in e.params]
    got = [e.params["jaxpr"] for e in back.jaxpr.eqns if "jaxpr" in e.params]
    assert len(got) == 3 and calls[0] is calls[1] and calls[0] is not calls[2]
    assert got[0] is got[1] and got[0] is not got[2]


def test_a_broadcast_constant_keeps_its_zero_strides():
    """JAX lowers a constant whose strides hold a zero as its values broadcast, and
    a contiguous one as every value: the module (and a module-keyed executable) of
    a decoded jaxpr is the first process's only if the strides come back."""
    nan3 = np.broadcast_to(np.float32(np.nan), (3,))
    cols = np.broadcast_to(np.arange(3, dtype=np.float32)[:, None], (3, 2))
    closed = jax.jit(lambda a: jnp.where(a > 1, nan3, a)[:, None] + cols).trace(X[0, :3]).jaxpr
    back = C.decode(json.loads(json.dumps(C.encode(closed))), jax_primitives_by_name()).closed
    consts = [np.asarray(c) for c in closed.consts]
    got = [np.asarray(c) for c in back.consts]
    assert [c.strides for c in consts] == [c.strides for c in got] == [(0,), (4, 0)]
    assert all(np.array_equal(a, b, equal_nan=True) for a, b in zip(consts, got, strict=True))


def test_memoized_pieces_keep_exact_types_and_nesting_is_bounded():
    """The entry holds each aval, name stack and equation context once, in a table
    the equations name by index: a context with ``1`` where JAX's has ``True`` is
    refused all the same; a param nested deeper than the bound too."""
    data = C.encode(jax.jit(jax.grad(f_loss)).trace(X).jaxpr)
    prims = jax_primitives_by_name()
    C.decode(data, prims)
    eqns = next(j["eqns"] for j in data["jaxprs"] if len(j["eqns"]) > 1)
    assert eqns[0][4] == eqns[1][4] == 0 and type(data["ctxs"][0][1]) is bool  # (one context)
    bad = copy.deepcopy(data)
    bad["ctxs"][0][1] = int(bad["ctxs"][0][1])
    with pytest.raises(C.Undecodable):
        C.decode(bad, prims)
    deep: list = ["t", 1]
    for _ in range(C.MAX_VALUE_DEPTH + 2):
        deep = ["t", deep]
    bad = copy.deepcopy(data)
    eqn = next(e for j in bad["jaxprs"] for e in j["eqns"] if e[3])
    eqn[3][next(iter(eqn[3]))] = deep
    with pytest.raises(C.Undecodable, match="too-deep"):
        C.decode(bad, prims)


def test_a_field_nested_past_the_stack_is_undecodable():
    """An equation's name stack or context nested deeper than the interpreter's
    stack (the decoder's memo keys read it first): refused, never a RecursionError
    (review 105)."""
    data = C.encode(jax.jit(f_loss).trace(X).jaxpr)
    prims = jax_primitives_by_name()
    nested: list = []
    for _ in range(sys.getrecursionlimit() * 2):
        nested = [nested]
    for table in ("ctxs", "stacks"):  # (the contexts, the name stacks)
        bad = copy.deepcopy(data)
        bad[table][0] = nested
        with pytest.raises(C.Undecodable):
            C.decode(bad, prims)


def _mutations(data):
    """Every node of ``data`` (a path to it), to be replaced by hostile values."""
    out = []

    def walk(v, path):
        out.append(path)
        if type(v) is list:
            for i, x in enumerate(v):
                walk(x, (*path, i))
        elif type(v) is dict:
            for k, x in v.items():
                walk(x, (*path, k))

    walk(data, ())
    return out


_DATA = None


def _data():
    global _DATA
    if _DATA is None:
        make, args = PROGRAMS["cond"]
        _DATA = C.encode(make().trace(*args).jaxpr)
    return _DATA


JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=8,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_a_damaged_entry_decodes_or_is_undecodable_never_another_error(data):
    base = _data()
    paths = _mutations(base)
    path = data.draw(st.sampled_from(paths[1:]))
    bad = copy.deepcopy(base)
    node = bad
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = data.draw(JSON)
    try:
        C.decode(bad, jax_primitives_by_name())
    except C.Undecodable:
        pass


def test_a_jax_module_loading_meanwhile_is_scanned_when_done(monkeypatch):
    """The table a stored jaxpr's primitives are read against counts a scan as done
    only for what it listed: a JAX module still running its body (another thread's
    import) is looked at again on the next call (review 137: counted as scanned, its
    primitives were never named, and every entry binding one was refused)."""
    import types

    late = types.ModuleType("jax._src.pcache_test_late")
    late.__spec__ = types.SimpleNamespace(_initializing=True)
    late.late_p = jax.extend.core.Primitive("pcache_test_late")
    monkeypatch.setitem(sys.modules, late.__name__, late)
    assert "jax._src.pcache_test_late:late_p" not in jax_primitives_by_name()
    late.__spec__._initializing = False
    assert jax_primitives_by_name()["jax._src.pcache_test_late:late_p"] is late.late_p
