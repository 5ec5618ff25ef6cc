"""Trace reuse fails closed: each class of false hit an outside review found, as a
scenario run with stock JAX and then with pcache in this process, compared bit for
bit. A re-created callable whose key cannot be proven equal must trace.

Every scenario re-creates its jit each step while something the trace depends on
changes between steps (the shape of the reviews' reproducers).
"""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import importlib
import json
import math
import os
import subprocess
import sys
import types
import warnings

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from jax._src.lib.mlir.dialects import hlo
from jax.extend.core import Primitive
from jax.interpreters import ad, mlir

import pcache
from pcache import _trace

X = jnp.arange(1.0, 4.0, dtype=jnp.float32)


def _out(v) -> object:
    if isinstance(v, Exception):
        return type(v).__name__
    leaves = jax.tree_util.tree_leaves(v)
    return [(str(jnp.asarray(a).dtype), np.asarray(a).tobytes()) for a in leaves]


def _run(scenario) -> list:
    out = []
    for step in scenario():
        try:
            out.append(_out(step()))
        except Exception as exc:  # stock raises: pcache must raise the same
            out.append(_out(exc))
    return out


def _same_as_stock(tmp_path, scenario, **options) -> dict:
    """Run ``scenario`` (a generator of zero-argument steps) stock, then with pcache;
    assert equal results; return pcache's stats."""
    jax.clear_caches()  # (and pcache's record of the functions JAX's caches held)
    _trace.forget_states()
    stock = _run(scenario)
    options.setdefault("check", False)
    with pcache.enabled(tmp_path / "cache", **options):
        cached = _run(scenario)
        st = pcache.stats()
    assert cached == stock
    return st


# ------------------------------------------------------------ lossy encodings


def test_floats_by_their_bits_nan_sign_and_payload(tmp_path):
    def scenario():
        mk = lambda k: jax.jit(lambda x: x * math.copysign(1.0, k))  # noqa: E731
        for k in (float("nan"), -float("nan"), 0.0, -0.0):
            yield lambda k=k: mk(k)(X)
        payload = np.frombuffer(np.uint64(0x7FF8000000000001).tobytes(), np.float64)[0]
        for k in (float("nan"), float(payload)):
            yield lambda k=k: jax.jit(lambda x: x + np.float64(k).view(np.int64) % 7)(X)

    _same_as_stock(tmp_path, scenario)


def test_numpy_dtypes_by_their_whole_description(tmp_path):
    """Record dtypes of one size and several float8 formats share ``dtype.str``."""
    rec_a = np.dtype([("a", "<f4"), ("b", "<f4")])
    rec_b = np.dtype([("b", "<f4"), ("a", "<f4")])
    raw = np.array([1.5, 2.5], np.float32).tobytes()

    def scenario():
        def mk(v):
            return jax.jit(lambda x: x * v["a"].astype(np.float32))

        for dt in (rec_a, rec_b, rec_a):
            yield lambda dt=dt: mk(np.frombuffer(raw, dt))(X)
        bits = np.array([0x3C], np.uint8)
        for dt in (ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2, ml_dtypes.float8_e4m3fn):
            v = bits.view(dt)
            yield lambda v=v: jax.jit(lambda x: x * v.astype(np.float32))(X)

    _same_as_stock(tmp_path, scenario)


# ------------------------------------------------------------ values equal by __eq__


def test_values_that_compare_equal_but_differ(tmp_path):
    tz = datetime.timezone(datetime.timedelta(hours=2))
    t1 = datetime.datetime(2020, 1, 1, 12, tzinfo=datetime.timezone.utc)
    t2 = t1.astimezone(tz)  # the same instant: t1 == t2, t1.hour != t2.hour

    def scenario():
        mk = lambda d: jax.jit(lambda x: x * math.copysign(1.0, float(d)))  # noqa: E731
        for d in (decimal.Decimal("0"), decimal.Decimal("-0")):
            yield lambda d=d: mk(d)(X)
        for t in (t1, t2):
            yield lambda t=t: jax.jit(lambda x: x * t.hour)(X)
        for r in (range(0, 3, 2), range(0, 4, 2)):  # equal ranges, other stops
            yield lambda r=r: jax.jit(lambda x: x * r.stop)(X)

    st = _same_as_stock(tmp_path, scenario)
    reasons = st["trace_miss_reasons"]
    assert reasons.get("value:Decimal") == 2 and reasons.get("value:datetime") == 2, reasons


def test_a_captured_mutable_object_is_never_compared_with_itself(tmp_path):
    class Holder:
        def __init__(self):
            self.k = 1.0

        def __eq__(self, other):
            return True

        __hash__ = object.__hash__

    h = Holder()

    def scenario():
        for k in (1.0, 2.0):
            h.k = k
            yield lambda: jax.jit(lambda x: x * h.k)(X)

    _same_as_stock(tmp_path, scenario)


# ------------------------------------------------------------ registries


class PBox:
    def __init__(self, v):
        self.v = v


SCALE = 1.0
jax.tree_util.register_pytree_node(
    PBox, lambda b: ((b.v,), None), lambda aux, c: PBox(c[0] * SCALE)
)


def test_a_user_pytree_unflatten_that_reads_a_global(tmp_path):
    global SCALE

    def scenario():
        global SCALE
        for s in (1.0, 3.0, 3.0):
            SCALE = s
            yield lambda: jax.jit(lambda b: b.v + 1)(PBox(X))
        SCALE = 1.0

    try:
        _same_as_stock(tmp_path, scenario)
    finally:
        SCALE = 1.0


def test_a_user_primitive_s_jvp_rule_registered_again(tmp_path):
    p = Primitive("pcache_test_sq")
    p.def_impl(lambda a: a * a)
    p.def_abstract_eval(lambda a: a)
    mlir.register_lowering(p, mlir.lower_fun(lambda a: a * a, multiple_results=False))

    def scenario():
        for scale in (2.0, 5.0):
            ad.defjvp(p, lambda g, a, scale=scale: g * scale * a)
            yield lambda: jax.jit(jax.grad(lambda a: p.bind(a).sum()))(X)

    _same_as_stock(tmp_path, scenario)


# ------------------------------------------------------------ globals walked around


def _user_modules():
    pkg = types.ModuleType("pcache_adv_pkg")
    cfg = types.ModuleType("pcache_adv_pkg.cfg")
    deep = types.ModuleType("pcache_adv_pkg.cfg.deep")
    cfg.LR = 1.0
    deep.LR = 1.0
    cfg.deep = deep
    pkg.cfg = cfg
    sys.modules.update({pkg.__name__: pkg, cfg.__name__: cfg, deep.__name__: deep})
    return pkg, cfg, deep


PKG, CFG, DEEP = _user_modules()


class SubModule(types.ModuleType):
    pass


SUBMOD = SubModule("pcache_adv_sub")
SUBMOD.LR = 1.0


def via_getattr(x):
    return x * getattr(PKG.cfg, "LR")  # noqa: B009


def via_chain(x):
    return x * PKG.cfg.deep.LR


def via_import_module(x):
    return x * importlib.import_module("pcache_adv_pkg.cfg").LR


def via_function_globals(x):
    return x * via_chain.__globals__["PKG"].cfg.LR


def via_frame(x):
    return x * sys._getframe().f_globals["PKG"].cfg.LR


def via_submodule(x):
    return x * SUBMOD.LR


def via_sys_modules(x):
    return x * sys.modules["pcache_adv_pkg.cfg"].LR


class Globals(dict):
    pass


via_dict_subclass = types.FunctionType(
    compile("lambda x: x * LR", "<adv>", "eval").co_consts[0], Globals(LR=1.0)
)


@pytest.mark.parametrize(
    "fn",
    [
        via_getattr,
        via_chain,
        via_import_module,
        via_function_globals,
        via_frame,
        via_submodule,
        via_sys_modules,
    ],
    ids=lambda f: f.__name__,
)
def test_module_state_read_around_the_guards(tmp_path, fn):
    def scenario():
        for lr in (1.0, 2.0, 2.0):
            CFG.LR = DEEP.LR = SUBMOD.LR = lr
            yield lambda: jax.jit(lambda x: fn(x))(X)
        CFG.LR = DEEP.LR = SUBMOD.LR = 1.0

    _same_as_stock(tmp_path, scenario)


def test_globals_in_a_dict_subclass(tmp_path):
    def scenario():
        for lr in (1.0, 2.0):
            via_dict_subclass.__globals__["LR"] = lr
            yield lambda: jax.jit(lambda x: via_dict_subclass(x))(X)

    st = _same_as_stock(tmp_path, scenario)
    assert any("globals-not-a-dict" in r for r in st["trace_miss_reasons"]), st


K_HELD = 1.0


def _plain():
    return 0


def _k_via_held_module(dc=dataclasses):
    """``dataclasses`` reads no state by name, but its attribute ``inspect`` does."""
    name = "_".join(["", "", "globals", "", ""])
    return dict(dc.inspect.getmembers(_plain))[name]["K_HELD"]


def test_a_held_library_module_reaching_reflection(tmp_path):
    """Reviews 25, 206: a library module held as a value (a default here; a closure
    cell alike) is refused: what user code reads through its attributes is not
    guarded (``dc.inspect``, reflective; ``m.K`` rebound by the library's own
    ``global K``). ``xp=jnp`` is refused too (a spurious miss: it traces)."""

    def scenario():
        global K_HELD
        for k in (1.0, 2.0, 2.0):
            K_HELD = k
            yield lambda: jax.jit(lambda x: x * _k_via_held_module())(X)
        K_HELD = 1.0
        for k in (2.0, 2.0):
            yield lambda k=k: jax.jit(lambda x, xp=jnp, onp=np: xp.sin(x) * onp.float32(k))(X)

    st = _same_as_stock(tmp_path, scenario)
    why = st["trace_miss_reasons"]
    assert why.get("global-captured-module:dataclasses:_k_via_held_module") == 3, why
    assert why.get("captured-module:jax.numpy") == 2 and st["trace_hits"] == 0, why


def test_the_reach_search_follows_spelled_names_and_every_item_of_a_container():
    import copy

    from pcache import _reach
    from pcache._usercode import NoReuse

    _reach.check([np, jnp, dataclasses], frozenset({"sum", "ma", "extras", "linalg", "fields"}))
    for roots, spell, part in [
        ([np], {"ma", "extras", "warnings"}, "numpy.ma.extras.warnings:warnings"),
        ([dataclasses], {"inspect"}, "dataclasses.inspect"),
        ([copy], {"dispatch_table"}, "copy.dispatch_table.[]:reflective-function:copyreg"),
    ]:
        with pytest.raises(NoReuse, match=part.replace(".", r"\.").replace("[]", r"\[\]")):
            _reach.check(roots, frozenset(spell))
    names = _reach.code_names(_k_via_held_module.__code__)
    assert {"dict", "inspect", "getmembers", "globals", "K_HELD", "join"} <= names


# ------------------------------------------------------------ trace-time writes


def test_a_function_that_writes_a_nonlocal_while_traced_is_never_reused(tmp_path):
    def scenario():
        n = 0

        def f(x):
            nonlocal n
            n += 1
            return x * 2

        for _ in range(3):
            yield lambda: jax.jit(lambda x: f(x))(X)
        yield lambda: jnp.float32(n)  # the writes all happened, as in stock

    st = _same_as_stock(tmp_path, scenario)
    assert st["trace_hits"] == 0 and any(
        r.startswith("writes-nonlocal") for r in st["trace_miss_reasons"]
    ), st


def test_a_function_that_writes_module_state_while_traced_is_never_reused(tmp_path):
    def scenario():
        CFG.calls = 0

        def f(x):
            CFG.calls += 1
            return x * 2

        for _ in range(3):
            yield lambda: jax.jit(lambda x: f(x))(X)
        yield lambda: jnp.float32(CFG.calls)

    _same_as_stock(tmp_path, scenario)


# ------------------------------------------------------------ settings


@pytest.mark.parametrize(
    "name, values",
    [
        ("jax_enable_custom_prng", (False, True)),
        ("jax_legacy_prng_key", ("allow", "warn")),
        ("jax_check_tracer_leaks", (False, True)),
    ],
)
def test_every_setting_tracing_reads_is_in_the_key(tmp_path, name, values):
    before = getattr(jax.config, name)

    def scenario():
        try:
            for v in values:
                jax.config.update(name, v)
                yield lambda: jax.jit(lambda x: (jax.random.PRNGKey(0), x + 1))(X)
        finally:
            jax.config.update(name, before)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _same_as_stock(tmp_path, scenario)


# ------------------------------------------------------------ lowering rules


MODE = "double"


def _mode_rule(ctx, v):
    return [hlo.add(v, v)] if MODE == "double" else [hlo.multiply(v, v)]


_mode_p = Primitive("pcache_test_mode")
_mode_p.def_abstract_eval(lambda a: a)
mlir.register_lowering(_mode_p, _mode_rule)


@pytest.mark.parametrize("reuse", [True, False])
def test_a_user_lowering_rule_is_lowered_again_on_every_hit(tmp_path, reuse):
    """Its output depends on a global it reads: the executable key alone (the rule's
    identity) would serve the old program; the lowered module completes it."""
    global MODE

    def scenario():
        global MODE
        for mode in ("double", "square"):
            MODE = mode
            yield lambda: jax.jit(lambda a: _mode_p.bind(a))(X)
        MODE = "double"

    try:
        _same_as_stock(tmp_path, scenario, trace_reuse=reuse)
    finally:
        MODE = "double"


# ------------------------------------------------------------ what a reuse must still do


def test_a_reused_trace_issues_the_donation_warning_again(tmp_path):
    y = jnp.array([1, 2], jnp.int32)

    def calls():
        caught = []
        for _ in range(3):
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                jax.jit(lambda a, b: a.sum() + jnp.float32(b.sum()), donate_argnums=0)(
                    jnp.array([1.0, 2.0], jnp.float32), y
                )
            caught.append(sum("donated buffers were not usable" in str(m.message) for m in w))
        return caught

    stock = calls()
    with pcache.enabled(tmp_path / "c", check=False):
        cached = calls()
        hits = pcache.stats()["trace_hits"]
    assert stock == [1, 1, 1] and cached == stock and hits == 2, pcache.stats()


@dataclasses.dataclass(frozen=True)
class Frozen:
    k: float


def test_the_seed_patterns_are_still_reused(tmp_path):
    def f(x):
        return jnp.sum(jnp.sin(x) ** 2)

    def scenario():
        for _ in range(3):
            yield lambda: jax.jit(jax.grad(f))(X)
            yield lambda: jax.jit(lambda x: x * Frozen(2.0).k)(X)
            yield lambda: jax.jit(jax.grad(jax.checkpoint(f)))(X)

    st = _same_as_stock(tmp_path, scenario)
    assert st["trace_hits"] == 6, st["trace_miss_reasons"]


def test_jax_s_own_values_captured_are_still_reused(tmp_path):
    """A jit object, a custom_jvp function (jax.nn.relu), a typed PRNG key and a
    sharding: on the allowlist, so a re-created callable holding them is reused."""
    inner = jax.jit(lambda x: x * 2)
    key = jax.random.key(0)
    sharding = jax.sharding.SingleDeviceSharding(jax.devices()[0])

    def scenario():
        live = []  # (a trace holding a captured JAX array lives as long as a callable)
        for _ in range(3):
            live.append(
                jax.jit(
                    lambda x: inner(jax.nn.relu(x)) + jax.random.uniform(key, x.shape),
                    out_shardings=sharding,
                )
            )
            yield lambda f=live[-1]: f(X)

    st = _same_as_stock(tmp_path, scenario)
    assert st["trace_hits"] == 2, st["trace_miss_reasons"]


def test_a_trace_that_warns_is_never_reused_however_it_warns(tmp_path):
    """``from warnings import warn`` bound before pcache was switched on, and a
    warning from C (numpy's overflow): stock warns at every step, so must pcache."""
    prog = (
        "from warnings import warn\n"
        "import warnings, numpy as np, jax, jax.numpy as jnp\n"
        "x = jnp.arange(3.0)\n"
        "big = np.float32(1e30)\n"
        "def py(v):\n"
        "    warn('legacy path')\n"
        "    return v * 2\n"
        "def c(v):\n"
        "    return v * float(big * big > 0)\n"
        "for f in (py, c):\n"
        "    for i in range(3):\n"
        "        with warnings.catch_warnings(record=True) as w:\n"
        "            warnings.simplefilter('always')\n"
        "            jax.jit(lambda v: f(v))(x)\n"
        "        print(f.__name__, len(w))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("JAX_PCACHE_")}
    stock = subprocess.run([sys.executable, "-c", prog], env=env, capture_output=True, text=True)
    env["JAX_PCACHE_DIR"] = str(tmp_path / "c")
    cached = subprocess.run([sys.executable, "-c", prog], env=env, capture_output=True, text=True)
    assert stock.returncode == 0 and cached.returncode == 0, cached.stderr[-2000:]
    assert stock.stdout == cached.stdout and "py 1\npy 1\npy 1" in stock.stdout


def test_argument_tree_keys_memoized_only_where_jax_equality_is_exact(tmp_path):
    """Argument trees of tuples, lists, Nones and empty dicts are keyed once and then
    found by JAX's ``==`` (exact for them); any tree with auxiliary data (dict keys,
    custom nodes) is walked every time: JAX's ``==`` says ``{2: a} == {2.0: a}``."""
    from pcache import _walk

    def key(tree):
        return _walk.Walker().treedef(jax.tree_util.tree_structure(tree))

    plain = [((1, [2, None]), {}), ([(1, 2)] * 16, 3), (None,), [], ((),), {}, 1]
    for tree in plain:
        td = jax.tree_util.tree_structure(tree)
        assert key(tree) == _walk.Walker()._treedef(td)[0] == key(tree)
        assert td in _walk._PLAIN_TREES
    assert len({key(t) for t in plain}) == len(plain)
    for tree in [({2: 1},), ({2.0: 1},), {"a": [1]}]:
        assert jax.tree_util.tree_structure(tree) not in _walk._PLAIN_TREES
        key(tree)
        assert jax.tree_util.tree_structure(tree) not in _walk._PLAIN_TREES
    assert key({2: 1}) != key({2.0: 1})
    assert jax.tree_util.tree_structure({2: 1}) == jax.tree_util.tree_structure({2.0: 1})

    def scenario():
        for tree in ({2: X}, {2.0: X}, {True: X}, {2: X}):
            f = jax.jit(lambda t: jnp.float32(sum(type(k) is float for k in t)) + t[2])
            yield lambda f=f, tree=tree: f(tree)

    _same_as_stock(tmp_path, scenario)


def test_the_standard_library_is_an_allowlist():
    """Reviews 26 and 27: stdlib modules that read interpreter or process state by
    what they are given (contextvars, signal, doctest, rlcompleter) were not on the
    denylist. Now any stdlib module off `PLAIN_STDLIB` is reflective, and a few
    functions of plain modules are named (functools.update_wrapper)."""
    import functools

    from pcache._reflection import library_function_reflects, reflective_callable, reflective_module

    for name in ("contextvars", "_contextvars", "signal", "doctest", "rlcompleter", "inspect",
                 "numpy.ctypeslib", "numpy.matrixlib.defmatrix", "logging", "warnings"):  # fmt: skip
        assert reflective_module(name), name
    for name in ("math", "functools", "operator", "numpy", "jax.numpy", "enum", "dataclasses"):
        assert not reflective_module(name), name
    assert reflective_callable(functools.update_wrapper)
    assert not reflective_callable(functools.reduce)
    assert library_function_reflects("functools", "wraps")


def test_reaching_user_state_through_a_library_object_is_refused():
    import json

    from pcache import _reach
    from pcache._usercode import NoReuse

    json._pcache_test_user = sys.modules[__name__]
    try:
        with pytest.raises(NoReuse, match="user-module"):
            _reach.check([json], frozenset({"_pcache_test_user"}))
        json._pcache_test_user = _plain  # a user function a library holds
        with pytest.raises(NoReuse, match="user-function"):
            _reach.check([json], frozenset({"_pcache_test_user"}))
    finally:
        del json._pcache_test_user


def _imports_plain_modules(x):
    from math import pi

    import jax.numpy
    import numpy.linalg as la
    from jax import numpy as jn

    return jn.sin(x) * pi + la.norm([1.0]) + jax.numpy.cos(x)


def test_imports_of_plain_library_modules_inside_traced_code_are_reused(tmp_path):
    def scenario():
        for _ in range(3):
            yield lambda: jax.jit(lambda x: _imports_plain_modules(x))(X)

    st = _same_as_stock(tmp_path, scenario)
    assert st["trace_hits"] == 2, st["trace_miss_reasons"]


def test_a_trace_not_recorded_is_counted_by_why(tmp_path):
    """A trace reuse must not serve again (it calls back into Python when run, it
    warned while traced) is traced again each time, as stock JAX traces it, and
    ``stats()["trace_unrecorded"]`` says why it was not recorded."""

    def scenario():
        for _ in range(3):
            yield lambda: jax.jit(
                lambda x: jax.pure_callback(np.sin, jax.ShapeDtypeStruct(x.shape, x.dtype), x)
            )(X)
        for _ in range(3):  # (JAX warns: float64 is not enabled)
            yield lambda: jax.jit(lambda x: x.astype(jnp.float64) + 1)(X)

    with warnings.catch_warnings():
        warnings.simplefilter("always")
        st = _same_as_stock(tmp_path, scenario)
    why = (st["trace_unrecorded"], st["trace_miss_reasons"])
    # (a recording that warned is not tried again: it traces inner jits afresh,
    # whose warnings JAX's caches would have skipped)
    assert st["trace_unrecorded"] == {"host-callback": 3, "warned": 1}, why
    assert st["trace_hits"] == 0


def test_the_default_warning_action_is_in_the_key(tmp_path):
    """``warnings.defaultaction`` (what a warning no filter matches does) decides
    whether a warning issued while tracing raises: a trace recorded under one is not
    served under another (review 85)."""
    saved = warnings.defaultaction

    def scenario():
        for action in ("default", "default", "ignore", "ignore"):
            warnings.defaultaction = action
            yield lambda: jax.jit(lambda x: x * 3.0)(X)
        warnings.defaultaction = saved

    try:
        st = _same_as_stock(tmp_path, scenario)
    finally:
        warnings.defaultaction = saved
    assert st["trace_hits"] == 2, st["trace_miss_reasons"]  # (each action's second call)


def test_a_table_empty_when_its_module_was_read_is_read_once_filled(tmp_path):
    """A type -> handler table that JAX's module holds empty when pcache first reads
    the module (``batching.make_iota_handlers``) is a handler table from the moment
    it holds one: a program's handler there refuses reuse, as in any other table
    (review 87's note). In a fresh process (tests here register handlers for good)."""
    script = """
import json, jax, jax.numpy as jnp, pcache
from jax._src.interpreters import batching

class Mine:
    pass

assert not batching.make_iota_handlers
x = jnp.arange(3.0)
outs = []
for i in range(6):
    if i == 3:
        batching.make_iota_handlers[Mine] = lambda *a: None
    outs.append(jax.jit(lambda v: v * 2.0)(x).tolist())
st = pcache.stats()
print(json.dumps([outs, st["trace_hits"], st["trace_miss_reasons"]]))
"""
    env = {**os.environ, "JAX_PCACHE_DIR": str(tmp_path / "c"), "JAX_PCACHE_RAISE_ERRORS": "1"}
    env.pop("JAX_PCACHE_TRACE_RECORD_AFTER", None)  # (the default: recorded at the second)
    out = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
    )
    outs, hits, reasons = json.loads(out.stdout.strip().splitlines()[-1])
    assert outs == [[0.0, 2.0, 4.0]] * 6
    assert hits == 1, reasons  # (the third call only)
    assert reasons.get("user-type-handler") == 3, reasons


def test_a_module_imported_as_another_left_is_read(tmp_path):
    """JAX's tables are looked for whenever ``sys.modules`` is written, not when its
    size changes: ``jax.experimental.jet`` imported as another module was removed (the
    count unchanged), a program's jet rule then registered in it, refuses reuse
    (review 89). Stock and pcache in fresh processes, compared."""
    script = """
import sys, types, json
import jax, jax.numpy as jnp
from jax import lax
x = jnp.arange(3.0)
sys.modules["_dummy_mod"] = types.ModuleType("_dummy_mod")
jax.jit(lambda a: a + 1.0)(x)
del sys.modules["_dummy_mod"]
n = len(sys.modules)
import jax.experimental.jet as jet
assert len(sys.modules) == n + 1, len(sys.modules) - n  # (jet alone)
SCALE = 2.0
def rule(primals_in, series_in, **params):
    (p,), (s,) = primals_in, series_in
    return jnp.sin(p), [t * SCALE for t in s]
jet.jet_rules[lax.sin_p] = rule
mk = lambda: jax.jit(lambda a: jet.jet(lambda b: lax.sin(b), (a,), ((jnp.ones_like(a),),))[1][0])
outs = []
for i in range(5):
    SCALE = float(i + 2)
    outs.append(mk()(x).tolist())
print(json.dumps(outs))
"""
    env = {k: v for k, v in os.environ.items() if not k.startswith("JAX_PCACHE")}

    def run(e: dict) -> str:
        out = subprocess.run(
            [sys.executable, "-c", script], env=e, capture_output=True, text=True, check=True
        )
        return out.stdout.strip().splitlines()[-1]

    stock = run(env)
    assert run({**env, "JAX_PCACHE_DIR": str(tmp_path / "c")}) == stock
    assert (
        run({**env, "JAX_PCACHE_DIR": str(tmp_path / "d"), "JAX_PCACHE_TRACE_RECORD_AFTER": "1"})
        == stock
    )


def test_hooks_are_judged_by_what_they_call():
    """A trace function, profile function, ``copyreg`` reducer or import finder is
    the program's when it calls the program's code or reads its data, however it is
    wrapped (review 89: a ``functools.partial`` of a program's function passed as a
    library object); the interpreter's, numpy's and pytest's own are not."""
    import copyreg
    import functools
    from types import SimpleNamespace

    from pcache import _hoststate

    def mine(*a):
        return None

    data = {"k": 1}
    assert _hoststate._user_hook(functools.partial(mine))
    assert _hoststate._user_hook(functools.partial(functools.partial(np.add), mine))
    assert _hoststate._user_hook(data.get)  # (a builtin bound to the program's data)
    assert _hoststate._user_hook([math.sin, mine])
    assert not _hoststate._user_hook(functools.partial(math.sin))
    assert not _hoststate._user_hook(sys.breakpointhook)
    assert not any(map(_hoststate._user_hook, copyreg.dispatch_table.values()))
    assert not _hoststate._library_finder(SimpleNamespace(find_spec=mine))
    assert all(map(_hoststate._library_finder, sys.meta_path))  # (pytest's among them)


def test_opaque_callables_are_taken_as_the_programs():
    """Review 94: a library object keeping what it calls where no Python code reads
    it (``functools.lru_cache`` of a program's function, its ``__wrapped__`` deleted)
    is the program's code, as a hook or a rule; the standard library's getters by
    name, builtins and JAX's own C types are not."""
    import functools
    import operator
    import threading

    from jax._src import config

    from pcache import _hoststate, _user_callables
    from pcache._introspect import fields

    def red(p):
        return p

    w = functools.lru_cache(maxsize=None)(red)
    del w.__wrapped__
    assert red in fields(w) and fields(threading.local()) is None
    assert _user_callables.user_code(w) and _hoststate._user_hook(w)
    assert _hoststate._program_function(w)
    for lib in (operator.methodcaller("tree_flatten"), len, config.enable_x64):
        assert not _user_callables.user_code(lib)

    class Slotted:
        __slots__ = ("f",)

        def __init__(self, f):
            self.f = f

    assert fields(Slotted(red)) == [red]


def test_partial_subclasses_and_program_data_held_by_hooks_are_the_programs():
    """Review 95: a program's subclass of ``functools.partial`` runs its own
    ``__call__`` whatever its fields hold (a hook, a rule, an import finder's
    callable); a mutable container a hook holds through a partial, a bound method
    or a library function's closure is the program's data; library functions over a
    program's function (``singledispatch``) and methods of a program's objects are
    the program's to an import finder."""
    import functools
    import operator
    import weakref

    import jax

    from pcache import _canon_rules, _hoststate, _user_callables

    class P(functools.partial):
        def __call__(self, *a):
            return a

    sub = P(operator.add)
    assert _hoststate._user_hook(sub) and _user_callables.user_code(sub)
    assert _hoststate._program_function(sub)
    assert _canon_rules._describe_rule(P(jax.numpy.sin), 0) is None
    assert not _hoststate._user_hook(functools.partial(operator.add, 1))
    assert not _user_callables.user_code(jax.tree_util.Partial(operator.add))
    D: dict = {}
    for hook in (functools.partial(operator.getitem, D), D.get, types.MethodType(len, [1])):
        assert _hoststate._user_hook(hook), hook

    class Obj:
        def m(self):
            return 0

    def mine():
        return 0

    assert _hoststate._program_function(functools.singledispatch(mine))
    assert _hoststate._program_function(Obj().m) and _hoststate._program_function(Obj)
    assert _user_callables.user_code(weakref.proxy(Obj()))  # (dead: no ReferenceError)

    class CallableModule(types.ModuleType):
        def __call__(self):
            return 0

    assert _user_callables.user_code(CallableModule("m")) and not _user_callables.user_code(types)
    assert not _user_callables.user_code(jax.lax.sin_p)


def test_an_added_entry_is_an_override_unless_its_key_is_new(tmp_path):
    """Review 94: an entry added to one of JAX's tables after pcache first read it is
    an override (named in every key) when its key existed then (``np.float32``, a
    key of other tables; ``fractions.Fraction``, a class then alive), and a first
    registration when its key is new: a class made since, a primitive no table held.
    In a fresh process (pcache's baseline is taken when it is switched on)."""
    script = """
import fractions, json, jax, numpy as np, pcache
from jax._src import dtypes, core
from pcache import _canon, _canon_rules

def token():
    return _canon_rules.overrides_key(_canon.jax_primitive_name)[0]

pcache.enable()
got = [token()]
for key in ("later", "prim", "float32", "fraction"):
    if key == "later":
        core.pytype_aval_mappings[type("Made", (), {})] = core.pytype_aval_mappings[int]
    elif key == "prim":
        core.custom_typechecks[core.Primitive("mine")] = lambda *a: None
    elif key == "float32":
        dtypes.python_scalar_types_to_dtypes[np.float32] = dtypes.python_scalar_types_to_dtypes[int]
    else:
        dtypes.python_scalar_types_to_dtypes[fractions.Fraction] = np.dtype("float32")
    got.append(token())
print(json.dumps(got))
"""
    env = {**os.environ, "JAX_PCACHE_DIR": str(tmp_path / "c"), "JAX_PCACHE_RAISE_ERRORS": "1"}
    out = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
    )
    base, later, prim, f32, frac = json.loads(out.stdout.strip().splitlines()[-1])
    assert base == later == prim == ""
    assert f32 and frac and f32 != frac


def test_a_primitive_registered_after_pcache_is_still_reused(tmp_path):
    """Review 101: a trace binding a primitive whose rules were registered after pcache
    was switched on (equinox imported after the first JAX call) is recorded and
    reused; only a rule described by content over data the program may change in
    place (a partial's keywords: review 98) keeps its digests from being memoized."""
    script = """
import json, jax, jax.numpy as jnp, pcache
x = jnp.arange(3.0)
jax.jit(lambda a: a + 1)(x)
import equinox.internal as eqxi
outs = [jax.jit(lambda a: jnp.where(eqxi.unvmap_any(a > 1), a, -a))(x).tolist() for _ in range(4)]
st = pcache.stats()
print(json.dumps([outs, st["trace_hits"], st["trace_unrecorded"]]))
"""
    env = {**os.environ, "JAX_PCACHE_DIR": str(tmp_path / "c"), "JAX_PCACHE_RAISE_ERRORS": "1"}
    env.pop("JAX_PCACHE_TRACE_RECORD_AFTER", None)
    out = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
    )
    outs, hits, unrecorded = json.loads(out.stdout.strip().splitlines()[-1])
    assert outs == [[0.0, 1.0, 2.0]] * 4
    assert hits == 2 and not unrecorded, (hits, unrecorded)


def test_the_library_float_scan_runs_no_program_code(monkeypatch):
    """Which loaded modules hold a float is asked of every module's values by their
    types' identity: a program's metaclass ``__eq__`` never runs while a key is made
    (``float in types`` would call it, and its error left a module unscanned: review
    105)."""
    import types as pytypes

    from pcache import _walk_kinds

    calls = []

    class Meta(type):
        def __eq__(cls, other):
            calls.append(other)
            raise RuntimeError("the program's __eq__")

        __hash__ = type.__hash__

    class Odd(metaclass=Meta):
        pass

    mod = pytypes.ModuleType("pcache_test_odd_module")
    mod.ODD, mod.HALF = Odd(), 0.5
    monkeypatch.setitem(sys.modules, mod.__name__, mod)
    assert _walk_kinds.is_library_float(2.5) is False
    assert _walk_kinds.is_library_float(mod.HALF) is False  # (not a library's module)
    assert calls == []
    assert _walk_kinds.is_library_float(np.inf) is True


def test_a_library_files_compiled_form_is_its_current_bytecode_or_its_source(tmp_path):
    """The provenance check compares code with a library file's compiled form as the
    import system would load it: its bytecode cache only while the source's size and
    modification time (or its hash: PEP 552) say the cache is current, else the
    source compiled (a stale cache is not what the program runs)."""
    import py_compile
    from pathlib import Path

    from pcache import _provenance

    def returned(code):
        (f,) = [c for c in code.co_consts if getattr(c, "co_name", None) == "f"]
        return [k for k in f.co_consts if type(k) is int]

    src = tmp_path / "mod.py"
    for mode in (py_compile.PycInvalidationMode.TIMESTAMP,
                 py_compile.PycInvalidationMode.CHECKED_HASH):  # fmt: skip
        src.write_text("def f():\n    return 1\n")
        cached = py_compile.compile(str(src), doraise=True, invalidation_mode=mode)
        assert returned(_provenance._load(str(src))) == [1]
        Path(cached).write_bytes(Path(cached).read_bytes()[:16] + b"\xff")  # (unreadable)
        assert returned(_provenance._load(str(src))) == [1]  # (compiled from the source)
        py_compile.compile(str(src), doraise=True, invalidation_mode=mode)
        src.write_text("def f():\n    return 22222\n")  # (edited after the cache was written)
        assert returned(_provenance._load(str(src))) == [22222]
