"""Trace reuse: a re-created callable is served the trace of the callable it equals.

Every scenario runs twice in this process, first with pcache off (stock JAX), then
on; the results must be bitwise equal. A counter inside the traced Python function
counts the traces: stock traces a re-created callable on every call, pcache only
when the callable differs from every one traced before (the contract in
`pcache._trace`), and the counts and `pcache.stats()` say so.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import gc
import json
import logging
import os
import subprocess
import sys
import textwrap
import types
import typing
import weakref

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import pcache
from pcache import _compat, _trace, _walk
from tests.trace_mods import usercfg
from tests.trace_mods.userparams import Params

X = jnp.linspace(-1.0, 1.0, 16, dtype=jnp.float32).reshape(4, 4)
# The trace counter: JAX's own event for each top-level trace of a jit call (a
# counter written by the traced function would itself stop reuse: a trace-time
# write to module state is a side effect a reuse would skip).
TRACES = types.SimpleNamespace(n=0)


def _on_event(event: str, secs: float, **kwargs) -> None:
    if event == "/jax/core/compile/jaxpr_trace_duration":
        TRACES.n += 1


jax.monitoring.register_event_duration_secs_listener(_on_event)


def _traced() -> None:
    """Marks the functions whose traces the scenarios count (reads nothing)."""


def _bits(out) -> list[bytes]:
    return [
        np.asarray(leaf).tobytes() + str(np.asarray(leaf).dtype).encode()
        for leaf in jax.tree_util.tree_leaves(out)
    ]


def _compare(tmp_path, scenario, **options):
    """(stock results, pcache results, stock traces, pcache traces, stats).

    Check mode (``JAX_PCACHE_CHECK=1``, as CI runs the suite) traces every reused
    call as well, so trace counts are taken with it off unless asked for."""
    options.setdefault("check", False)
    # What earlier tests left in JAX's identity caches (and pcache's record of the
    # functions they hold) is not this scenario's business.
    jax.clear_caches()
    _trace.forget_states()
    TRACES.n = 0
    stock = scenario()
    stock_traces = TRACES.n
    TRACES.n = 0
    with pcache.enabled(tmp_path / "cache", raise_errors=True, **options):
        cached = scenario()
        st = pcache.stats()
    assert cached == stock
    return stock, cached, stock_traces, TRACES.n, st


# ------------------------------------------------------------ the seed patterns


def f_loss(x):
    _traced()
    return jnp.mean(x @ x.T)


def h_scaled(x, k):
    _traced()
    return jnp.sum(jnp.sin(x * k) @ x)


def h_first(k, x):
    _traced()
    return jnp.sum(jnp.sin(x * k) @ x)


def mlp_loss(params, x):
    _traced()
    for w, b in params:
        x = jnp.tanh(x @ w + b)
    return jnp.mean(x**2)


PARAMS = [(X, X[0]), (X.T, X[1])]


def _step_grad():
    return jax.jit(jax.grad(f_loss))(X)


def _step_lambda():
    return jax.jit(lambda x: (_traced(), jnp.tanh(x @ x.T).sum())[1])(X)


def _step_partial():
    return jax.jit(functools.partial(h_scaled, k=2.0))(X)


def _step_nested():
    def body(a):
        _traced()
        return jnp.exp(-a) * 2.0

    return jax.jit(body)(X)


def _step_remat():
    return jax.jit(jax.grad(jax.checkpoint(mlp_loss)))(PARAMS, X)


def _step_value_and_grad_vmap():
    return jax.jit(jax.vmap(jax.value_and_grad(f_loss)))(jnp.stack([X, X + 1]))


@pytest.mark.parametrize(
    "step",
    [_step_grad, _step_lambda, _step_partial, _step_nested, _step_remat, _step_value_and_grad_vmap],
    ids=lambda s: s.__name__.removeprefix("_step_"),
)
def test_a_recreated_callable_is_traced_once(tmp_path, step):
    _, _, stock_traces, traces, st = _compare(tmp_path, lambda: [_bits(step()) for _ in range(5)])
    # (top-level traces: value_and_grad_vmap's argument is made by two jits more,
    # traced once in the stock run unless an earlier test traced them)
    assert stock_traces - traces in ((4, 6) if step is _step_value_and_grad_vmap else (4,))
    assert traces == 1
    assert st["trace_hits"] == 4
    assert st["compiles"] == 1


def test_new_argument_shapes_trace_the_new_callable(tmp_path):
    def scenario():
        out = []
        for n in (4, 4, 8, 4, 8):
            out.append(_bits(jax.jit(jax.grad(f_loss))(jnp.ones((n, n)))))
        return out

    _, _, _, traces, st = _compare(tmp_path, scenario)
    assert traces == 2 and st["trace_hits"] == 3
    assert st["trace_miss_reasons"].get("avals-changed") == 1


# ------------------------------------------------------------ what changes a callable


def test_changed_closure_value(tmp_path):
    def make(k):
        return lambda x: (_traced(), x * k)[1]

    def scenario():
        return [_bits(jax.jit(make(k))(X)) for k in (1.5, 1.5, 2.5, 2.5, 1.5, -0.0, 0.0)]

    _, _, _, traces, st = _compare(tmp_path, scenario)
    assert traces == 4  # 1.5, 2.5, -0.0 and 0.0 (a float by its bits)
    assert st["trace_hits"] == 3
    assert any(r.startswith("closure-changed:") for r in st["trace_miss_reasons"]), st


def test_closure_values_are_compared_with_their_type(tmp_path):
    def make(k):
        return lambda x: (_traced(), x * k)[1]

    def scenario():
        return [_bits(jax.jit(make(k))(X)) for k in (1, 1.0, True, 1, np.float32(1.0))]

    _, _, _, traces, st = _compare(tmp_path, scenario)
    assert traces == 4 and st["trace_hits"] == 1


def test_changed_partial_argument_and_keyword(tmp_path):
    def scenario():
        out = []
        for k in (2.0, 2.0, 3.0):
            out.append(_bits(jax.jit(functools.partial(h_first, k))(X)))
        for k in (2.0, 2.0, 3.0):
            out.append(_bits(jax.jit(functools.partial(h_scaled, k=k))(X)))
        return out

    _, _, _, traces, st = _compare(tmp_path, scenario)
    assert traces == 4 and st["trace_hits"] == 2
    reasons = st["trace_miss_reasons"]
    assert reasons["partial-arg-changed"] == 1 and reasons["partial-keyword-changed"] == 1


def test_changed_default(tmp_path):
    def scenario():
        out = []
        for k in (2.0, 2.0, 3.0):

            def f(x, k=k):
                _traced()
                return x * k

            out.append(_bits(jax.jit(f)(X)))
        f.__defaults__ = (4.0,)  # the same function object, mutated
        out.append(_bits(jax.jit(f)(X)))
        out.append(_bits(jax.jit(jax.grad(lambda x: f(x).sum()))(X)))
        return out

    _, _, _, _, st = _compare(tmp_path, scenario)
    assert st["trace_hits"] == 1
    assert any(r.startswith("default-changed:") for r in st["trace_miss_reasons"]), st


SCALE = 2.0
OFFSET = 1.0


def helper(x):
    return x + OFFSET


def test_changed_direct_global_and_global_of_a_called_function(tmp_path):
    global SCALE, OFFSET

    def scenario():
        global SCALE, OFFSET
        SCALE, OFFSET = 2.0, 1.0
        out = []
        for i in range(4):
            if i == 2:
                SCALE, OFFSET = 3.0, -1.0
            out.append(_bits(jax.jit(lambda x: (_traced(), x * SCALE)[1])(X)))
            out.append(_bits(jax.jit(lambda x: (_traced(), helper(x))[1])(X)))
        return out

    try:
        _, _, _, traces, st = _compare(tmp_path, scenario)
    finally:
        SCALE, OFFSET = 2.0, 1.0
    reasons = st["trace_miss_reasons"]
    # A changed global stops reuse of what read it (JAX's own caches may hold
    # traces of functions that read the old value): every later call traces.
    assert reasons["global-changed:SCALE"] == 2 and reasons["global-changed:OFFSET"] == 2, st
    assert st["trace_hits"] == 2 and traces == 6


class HParams(typing.NamedTuple):
    lr: float = 0.1
    n: int = 2


HP = HParams()


def test_namedtuple_global_is_reused_and_keyed_by_its_fields(tmp_path):
    """A NamedTuple global (its class holds ``typing.NamedTuple`` in
    ``__orig_bases__`` and C field getters: both once refused) is reused, and a
    new value with another field traces again."""
    global HP

    def scenario():
        global HP
        out = []
        for hp in (HParams(), HParams(), HParams(lr=0.3), HParams(lr=0.3)._replace(n=5)):
            HP = hp
            out.append(_bits(jax.jit(lambda x: (_traced(), x * HP.lr * HP.n)[1])(X)))
        return out

    try:
        _, _, _, traces, st = _compare(tmp_path, scenario)
    finally:
        HP = HParams()
    assert st["trace_hits"] == 1 and traces == 3, st
    assert st["trace_miss_reasons"]["global-changed:HP"] == 2, st


CFG = types.ModuleType("cfg")  # a user module holding settings
CFG.lr = 0.5


def test_changed_attribute_of_a_user_module(tmp_path):
    def scenario():
        CFG.lr = 0.5
        out = []
        for i in range(4):
            if i == 2:
                CFG.lr = 0.25
            out.append(_bits(jax.jit(lambda x: (_traced(), x * CFG.lr)[1])(X)))
            out.append(_bits(jax.jit(lambda x: (_traced(), jnp.sin(x))[1])(X)))
        return out

    _, _, _, _, st = _compare(tmp_path, scenario)
    assert st["trace_miss_reasons"]["global-changed:lr"] == 2, st
    assert st["trace_hits"] == 4  # the first lambda before the change, jnp.sin's throughout


def test_nonlocal_rebinding_and_a_new_equal_function(tmp_path):
    """JAX's checkpoint caches its trace on the function object: after ``bump()``
    stock serves the old trace to the same ``f``, and a fresh one to a new ``f2``
    equal to ``f``'s new state. A trace of the mutated ``f`` may never serve ``f2``.
    (pcache's recordings are made afresh, in a trace context of their own: JAX's
    caches hold no trace of ``f`` from them, so the same ``f`` after ``bump()`` is
    traced afresh where stock serves its stale trace, as the README says.)"""

    def outer():
        k = 1.0

        def f(x):
            _traced()
            return jnp.sum(jnp.sin(x) * k)

        def bump():
            nonlocal k
            k += 1.0

        return f, bump

    def scenario():
        f, bump = outer()
        out = [_bits(jax.jit(jax.grad(jax.checkpoint(f)))(X)) for _ in range(2)]
        bump()
        out += [_bits(jax.jit(jax.grad(jax.checkpoint(f)))(X)) for _ in range(2)]
        f2, bump2 = outer()
        bump2()
        out += [_bits(jax.jit(jax.grad(jax.checkpoint(f2)))(X)) for _ in range(2)]
        out += [_bits(jax.jit(jax.grad(lambda x: f(x)))(X))]  # f without checkpoint: fresh
        return out

    jax.clear_caches()
    _trace.forget_states()
    stock = scenario()
    assert stock[2] == stock[0] and stock[4] != stock[0]  # what stock does, shown
    with pcache.enabled(tmp_path / "cache", raise_errors=True, check=False):
        cached = scenario()
    assert cached[:2] == stock[:2] and cached[4:] == stock[4:]
    assert cached[2] == cached[3] == stock[4]  # afresh: f's new state, as f2's


def test_numpy_array_captured_and_mutated_in_place(tmp_path):
    def scenario():
        a = np.arange(4, dtype=np.float32)
        big = np.arange(200_000, dtype=np.float32)  # above NUMPY_MAX_BYTES: not reused
        out = []
        for i in range(6):
            if i in (2, 4):
                a[0] += 1.0
            if i == 5:
                a[0] -= 2.0  # back to the first content
            out.append(_bits(jax.jit(lambda x: (_traced(), x + a)[1])(X)))
        out.append(_bits(jax.jit(lambda x: x.sum() + big[-1])(X)))
        out.append(_bits(jax.jit(lambda x: x.sum() + big[-1])(X)))
        return out

    _, _, _, _, st = _compare(tmp_path, scenario)
    assert st["trace_hits"] == 3, st  # i = 1, 3 and 5 (the first content again)
    assert st["trace_miss_reasons"].get("numpy-too-large") == 2


def test_list_and_dict_captured_and_changed(tmp_path):
    def scenario():
        xs = [1.0]
        d = {"k": 2.0}
        out = []
        for i in range(6):
            if i == 2:
                xs.append(3.0)
            if i == 4:
                d["k"] = 5.0
            out.append(_bits(jax.jit(lambda x: (_traced(), x * sum(xs) * d["k"])[1])(X)))
        return out

    _, _, _, traces, st = _compare(tmp_path, scenario)
    assert traces == 3 and st["trace_hits"] == 3


def test_method_of_an_object_whose_attribute_changed(tmp_path):
    class Model:
        def __init__(self):
            self.scale = 2.0

        def apply(self, x):
            _traced()
            return x * self.scale

    @dataclasses.dataclass(frozen=True)
    class Frozen:
        scale: float

        def apply(self, x):
            _traced()
            return x * self.scale

    def scenario():
        m = Model()
        out = [_bits(jax.jit(m.apply)(X)) for _ in range(2)]
        m.scale = 3.0
        out += [_bits(jax.jit(m.apply)(X)) for _ in range(2)]
        out += [_bits(jax.jit(Frozen(s).apply)(X)) for s in (2.0, 2.0, 3.0)]
        return out

    _, _, _, _, st = _compare(tmp_path, scenario)
    reasons = st["trace_miss_reasons"]
    assert [n for r, n in reasons.items() if r.endswith(".Model")] == [4]  # never reused
    assert st["trace_hits"] == 1  # Frozen(2.0) twice


def test_redefined_function_with_the_same_body(tmp_path):
    src = "def f(x):\n    _traced()\n    return x * 2.0\n"

    def scenario():
        out = []
        for _ in range(3):
            ns = {"_traced": _traced}
            exec(compile(src, "<user>", "exec"), ns)  # a new code object each time
            out.append(_bits(jax.jit(ns["f"])(X)))
        return out

    _, _, _, traces, st = _compare(tmp_path, scenario)
    assert traces == 3 and st["trace_hits"] == 0


def test_static_args_and_donation(tmp_path):
    def scenario():
        out = []
        for n in (2, 2, 3):
            g = jax.jit(lambda x, n: (_traced(), x * n)[1], static_argnums=1)
            out.append(_bits(g(X, n)))
        for _ in range(3):
            y = jnp.ones(4) * 3.0
            out.append(_bits(jax.jit(lambda y: (_traced(), y + 1.0)[1], donate_argnums=0)(y)))
        out.append(_bits(jax.jit(lambda y: (_traced(), y + 1.0)[1])(jnp.ones(4))))
        return out

    _, _, _, _, st = _compare(tmp_path, scenario)
    assert st["trace_hits"] == 3  # n = 2 again, and the two donating repeats
    assert st["trace_miss_reasons"]["signature-changed"] == 1  # the static argument


def test_captured_jax_arrays_by_identity_and_tracers_never(tmp_path):
    def scenario():
        a = jnp.ones(4)
        b = jnp.ones(4)  # equal content, another array
        live = []  # a trace holding a's callable is reused while such a callable lives
        out = []
        for w in (a, a, b):
            live.append(jax.jit(lambda x, w=w: (_traced(), x.sum() + w)[1]))
            out.append(_bits(live[-1](X)))
        return out

    _, _, _, _, st = _compare(tmp_path, scenario)
    assert st["trace_hits"] == 1  # a's repeat


def test_a_recording_whose_trace_raised_leaves_its_context(tmp_path):
    """A trace pcache records is made in a trace context of its own, entered when
    JAX asks for the trace and left when JAX hands it over; one whose trace raised
    is left by the next call once the exception has let go of its recorder (until
    then every trace on the thread is made afresh, none served)."""

    def scenario():
        out = []
        try:
            jax.jit(lambda a: a @ jnp.ones((3, 3)))(jnp.ones(2))
        except TypeError as e:
            out.append([type(e).__name__.encode()])
        out += [_bits(jax.jit(lambda a: a * 2.0)(X)) for _ in range(3)]
        out.append([str(_compat.recording()).encode()])
        return out

    stock, cached, _, _, st = _compare(tmp_path, scenario)
    assert cached[0] == [b"TypeError"] and cached[-1] == [b"False"]
    assert st["trace_hits"] == 2, st["trace_miss_reasons"]


def _stale_global_jit():
    k = [2.0]

    def g(a):
        return a * k[0]

    return jax.jit(g), k


_G_STALE, _G_BOX = _stale_global_jit()


def _reads_global_jit(a):
    return a * _G_STALE(jnp.float32(1.0))


def test_check_mode_compares_with_what_stock_traces_now(tmp_path):
    """A global jit object is a value: its function and closure are walked (JAX keeps
    its trace whatever its closure holds since, but may drop it: review 82), so a
    change there is a new key, which traces as stock JAX does (JAX's cached trace of
    it: stale, as in stock). Check mode's trace of a reuse is made as stock JAX makes
    it (its caches, not a recording's fresh context), so it raises only where a
    reuse differs from that (review 77: it raised here)."""

    def scenario():
        out = []
        for i in range(4):
            out.append(_bits(jax.jit(lambda a: _reads_global_jit(a))(X)))
            if i == 1:
                _G_BOX[0] = 5.0
        _G_BOX[0] = 2.0
        return out

    stock, _, _, _, st = _compare(tmp_path, scenario, check=True)
    assert stock[3] == stock[0]  # (stock: G's cached trace, as before the change)
    assert st["trace_hits"] == 1, st["trace_miss_reasons"]
    assert st["trace_miss_reasons"].get("global-changed:_G_STALE") == 2


def test_a_captured_tracer_is_never_reused(tmp_path):
    def scenario():
        out = []
        for i in range(3):

            def outer(x):  # re-created; its inner callable captures the outer tracer
                return jax.jit(lambda y: y * x)(x)

            out.append(_bits(jax.jit(outer)(X + i)))
        return out

    # (the first trace of outer's key is not recorded, so its inner call is keyed;
    # inside a recording, calls trace as JAX traces them)
    _, _, _, _, st = _compare(tmp_path, scenario, trace_record_after=2)
    assert st["trace_hits"] == 1  # outer's third call
    assert st["trace_miss_reasons"].get("captured-tracer", 0) == 1


def test_a_deleted_or_donated_captured_array_is_never_reused(tmp_path):
    """Stock raises for a deleted captured array; a reuse must not compute from
    the old contents its trace holds."""

    def scenario():
        a = jnp.arange(4.0)
        mk = lambda: jax.jit(lambda x: x + a)  # noqa: E731
        keep = mk()
        first = _bits(keep(jnp.ones(4)))
        a.delete()
        try:
            mk()(jnp.ones(4))
        except Exception as exc:  # RuntimeError: Array has been deleted
            return [first, type(exc).__name__]
        return [first, "no error"]

    stock, cached, _, _, st = _compare(tmp_path, scenario)
    assert stock[1] != "no error"
    assert st["trace_miss_reasons"].get("array-deleted") == 1, st


def test_the_memo_keeps_no_captured_array_alive(tmp_path):
    """As stock JAX: once the last jit holding a captured array is dropped, the
    array is freed (the memo's trace holds it as a constant)."""
    with pcache.enabled(tmp_path / "c", check=False):
        x = jnp.ones(10)
        f = (lambda x: lambda: x)(x)
        g = jax.jit(f)
        x = weakref.ref(x)
        g()
        g()
        jax.jit((lambda y: lambda: y)(x()))()  # an equal callable: a reuse
        del f
        assert x() is not None
        g()
        del g
        gc.collect()
        assert x() is None


def test_a_trace_dropped_with_its_callables_misses_cleanly(tmp_path):
    """A re-created callable holding a JAX array, dropped after each call, takes its
    trace with it (above); the next equal callable misses as "evicted", traced as by
    stock JAX, not an error (the reason once crashed, every such step)."""
    p = {"w": X}

    def step():
        return jax.jit(jax.checkpoint(functools.partial(h_first, p["w"])))(X)

    stock, cached, stock_traces, traces, st = _compare(tmp_path, lambda: [step() for _ in range(3)])
    assert stock_traces == 3 and traces >= 3  # (the eviction of walked functions may add one)
    assert st["trace_miss_reasons"].get("evicted") == 2
    assert st["errors"] == 0


def test_a_trace_jax_made_of_another_state_is_never_taken_in(tmp_path):
    """A cond branch JAX traced at one state (its trace cached by identity), the
    state changed, a new equal branch recorded: the old branch, called again, is
    traced afresh (stock JAX serves its stale trace: a documented difference), in
    check mode too, where the check's own trace is taken afresh as well."""

    def make_h(box):
        def h(a):
            return a * box[0]

        return h

    box = [1.0]
    h = make_h(box)
    mk = lambda hh: jax.jit(lambda a: jax.lax.cond(a[0, 0] >= 0, hh, hh, a))  # noqa: E731
    jax.clear_caches()
    _trace.forget_states()
    with pcache.enabled(tmp_path / "cache", raise_errors=True, check=True):
        first = mk(h)(X)
        box[0] = 2.0
        fresh = mk(make_h([2.0]))(X)
        again = mk(h)(X)  # equal to the fresh one now: served, or traced afresh
    assert _bits(first) == _bits(X * 1.0)
    assert _bits(fresh) == _bits(again) == _bits(X * 2.0)


def test_python_side_effects_are_skipped_on_reuse_as_on_a_jax_trace_hit(tmp_path):
    printed = []
    f = lambda x: (printed.append(1), x + 1)[1]  # noqa: E731
    with pcache.enabled(tmp_path / "c", check=False):
        g = jax.jit(f)
        for _ in range(3):
            g(X)
        built_once = len(printed)
        for _ in range(3):
            jax.jit(f)(X)
    assert built_once == 1 and len(printed) == 1


# ------------------------------------------------------------ found by review: each was a false hit


def make_scaler(cfg):
    def scaler(x):
        return x * cfg["scale"]

    return scaler


SETTINGS = {"scale": 1.0}
scale_by_settings = make_scaler(SETTINGS)


def scaled_default(x, k=1.0):
    return x * k


def test_state_of_a_global_function_is_guarded(tmp_path):
    def scenario():
        out = []
        for v in (1.0, 1.0, 2.0):
            SETTINGS["scale"] = v
            scaled_default.__defaults__ = (v,)
            out.append(_bits(jax.jit(lambda x: scale_by_settings(x))(X)))
            out.append(_bits(jax.jit(lambda x: scaled_default(x))(X)))
        SETTINGS["scale"] = 1.0
        scaled_default.__defaults__ = (1.0,)
        return out

    stock, _, _, _, st = _compare(tmp_path, scenario)
    assert stock[4] != stock[0]
    assert st["trace_hits"] == 2


def test_custom_vjp_rules_run_the_calling_callable_s_own_objects(tmp_path):
    from jax.experimental import io_callback

    def make(state, log):
        @jax.custom_vjp
        def f(x):
            return x

        def bwd(_, g):
            jax.debug.callback(lambda v: log.append(float(v)), g)
            s = io_callback(lambda: np.float32(state[0]), jax.ShapeDtypeStruct((), jnp.float32))
            return (g * s,)

        f.defvjp(lambda x: (x, None), bwd)
        return f

    def scenario():
        s0, l0 = [1.0], []
        r0 = jax.grad(jax.jit(lambda x: make(s0, l0)(x)))(1.0)
        s0[0] = 5.0
        s1, l1 = [1.0], []
        r1 = jax.grad(jax.jit(lambda x: make(s1, l1)(x)))(1.0)
        jax.effects_barrier()
        return [_bits(r0), _bits(r1), l0, l1]

    _compare(tmp_path, scenario)


def test_builtin_method_bound_to_a_mutable_object(tmp_path):
    def scenario():
        d = {"s": 1.0}
        get = d.get
        out = []
        for v in (1.0, 1.0, 2.0):
            d["s"] = v
            out.append(_bits(jax.jit(lambda x: x * get("s"))(X)))
        return out

    _, _, _, _, st = _compare(tmp_path, scenario)
    assert st["trace_hits"] == 1


@dataclasses.dataclass(frozen=True)
class Cfg:
    s: object


class Box:
    pass


def test_frozen_dataclass_fields_by_these_rules_not_its_eq(tmp_path):
    def scenario():
        out = []
        for v in (1, 1.0, 0.0, -0.0, 0.0):
            c = Cfg(v)
            out.append(_bits(jax.jit(lambda x: x / c.s if c.s else x * c.s)(jnp.int32(3))))
        b = Box()
        for v in (1.0, 2.0):
            b.k = v
            c = Cfg(b)
            out.append(_bits(jax.jit(lambda x: x * c.s.k)(X)))
        return out

    _, _, _, _, st = _compare(tmp_path, scenario)
    assert st["trace_hits"] == 1  # 0.0 again
    assert st["trace_miss_reasons"]["value:Box"] == 2


@dataclasses.dataclass(frozen=True)
class Checked:
    s: float

    def __post_init__(self):
        if self.s < 0:
            raise ValueError("negative")


class Scaled:
    def __init__(self, s):
        self.s = s * 2


def test_a_constructor_on_its_own_object_is_reused(tmp_path):
    """A dataclass's ``__init__`` calls ``self.__post_init__()``, a class's ``__init__``
    writes ``self``: both the object under construction, neither a write a reuse
    skips (review 63's rules refuse an ``__init__`` held as a value, not these)."""

    def scenario():
        out = []
        for _ in range(3):
            c = Checked(2.0)
            out.append(_bits(jax.jit(lambda x: x * c.s * Scaled(3.0).s)(X)))
        return out

    _, _, _, traces, st = _compare(tmp_path, scenario)
    assert st["trace_hits"] == 2 and traces == 1, st["trace_miss_reasons"]


def test_a_stateless_library_sentinel_by_identity_and_emptiness(tmp_path):
    """A library class's instance that holds nothing (``dataclasses.MISSING``,
    equinox's ``MISSING``) is keyed by class and identity; given an attribute (a
    library module holds it), by its attributes too."""

    def scenario():
        out = []
        for step in range(4):
            if step == 2:
                dataclasses.MISSING.tag = 3.0
            m = dataclasses.MISSING
            out.append(_bits(jax.jit(lambda x: x * (getattr(m, "tag", 2.0)))(X)))
        del dataclasses.MISSING.tag
        return out

    _, _, _, _, st = _compare(tmp_path, scenario)
    assert st["trace_hits"] == 2, st["trace_miss_reasons"]  # (steps 1 and 3)


def test_a_library_singleton_by_identity_and_attributes(tmp_path):
    """A library's plain instance a library module holds (numpyro's
    ``constraints.real_vector`` as a user distribution's ``support``; here json's
    default encoder) is keyed by identity and attributes; one the program made
    (numpyro's ``NUTS``; here an encoder), by class and attributes: one made again
    equal is served, one made with another attribute is not."""

    def scenario():
        out = []
        enc = json._default_encoder
        for step in range(4):
            if step == 2:
                enc.indent = 4
            out.append(_bits(jax.jit(lambda x: x * (3.0 if enc.indent else 2.0))(X)))
            made = json.JSONEncoder(indent=2 if step == 3 else None)
            out.append(_bits(jax.jit(lambda x: x * (3.0 if made.indent else 2.0))(X)))
        enc.indent = None
        return out

    _, _, _, _, st = _compare(tmp_path, scenario)
    # (steps 1 and 3 of the singleton; steps 1 and 2 of the one made: step 3's indent
    # differs, and step 2's singleton change is no part of its key)
    assert st["trace_hits"] == 4, st["trace_miss_reasons"]
    assert "value:JSONEncoder" not in st["trace_miss_reasons"]


def test_ordered_and_default_dicts_by_order_factory_and_items(tmp_path):
    """An ``OrderedDict`` a callable holds is keyed by its items in its own order
    (``move_to_end`` reorders it and not the dict underneath), a ``defaultdict`` by
    its factory too: equal ones made again are served, a reordered one or another
    factory is traced again (the trace follows the order, and the factory fills a
    missing key)."""

    def scenario():
        out = []
        for step in range(4):
            od = collections.OrderedDict(a=1.0, b=2.0)
            if step == 2:
                od.move_to_end("a")
            dd = collections.defaultdict(float if step < 3 else int, {"w": 3.0})

            def f(x, od=od, dd=dd):
                first = next(iter(od))  # (its own order)
                return x * od[first] + jnp.asarray(dd["missing"] if False else dd["w"])

            out.append(_bits(jax.jit(f)(X)))
            out.append(_bits(jax.jit(lambda x, dd=dd: x + type(dd.default_factory())(1))(X)))
        return out

    _, _, _, _, st = _compare(tmp_path, scenario)
    # (f: served at step 1 only, steps 2 and 3 differ; the factory's: steps 1 and 2)
    assert st["trace_hits"] == 3, st["trace_miss_reasons"]
    assert not any(k.startswith("value:") for k in st["trace_miss_reasons"])

    def hidden():  # (an item in the dict its order does not list: review 116)
        out = []
        for k in (2.0, 2.0, 3.0):
            od = collections.OrderedDict(a=1.0)
            dict.__setitem__(od, "k", k)
            out.append(_bits(jax.jit(lambda x, od=od: x * od["k"])(X)))
        return out

    _, _, _, _, st = _compare(tmp_path, hidden)
    assert st["trace_hits"] == 0 and st["trace_miss_reasons"]["ordered-dict-inconsistent"] == 3


def _annotated(x: typing.Literal["a"] | tuple[int, ...]) -> int | None:
    return x


def test_typing_special_forms_and_unions_of_aliases_in_annotations(tmp_path):
    def scenario():
        return [_bits(jax.jit(lambda x: _annotated(x) * 2)(X)) for _ in range(3)]

    _, _, _, _, st = _compare(tmp_path, scenario)
    assert st["trace_hits"] == 2, st["trace_miss_reasons"]


def test_an_equinox_program_is_reused(tmp_path):
    """equinox (a test dependency) generates each Module's pytree flatten with
    ``exec``; proven by generating it again, a program over Modules is reused, and a
    Module captured is compared field by field (a defaulted field left unset is
    not the field set: review 68)."""
    eqx = pytest.importorskip("equinox")

    class Lin(eqx.Module):
        w: jax.Array
        b: float = 1.0

        def __init__(self, w, setb=False):
            self.w = w
            if setb:
                self.b = 1.0

        def __call__(self, x):
            return x @ self.w + self.b

    def scenario():
        out = []
        w = jnp.ones((X.shape[-1], 3))  # (a JAX array: by identity)
        alive = []  # (a trace over a JAX array lives as long as a callable it served)
        for setb in (False, False, True, False):
            m = Lin(w, setb)
            alive.append(jax.jit(lambda x, m=m: m(x) * len(jax.tree_util.tree_leaves(m))))
            out.append(_bits(alive[-1](X)))
        for _ in range(2):  # a Module as an argument: its treedef, by the generated flatten
            out.append(_bits(jax.jit(lambda m, x: m(x))(Lin(w), X)))
        return out

    _, _, _, _, st = _compare(tmp_path, scenario)
    # (the second and fourth closure, the second argument call)
    assert st["trace_hits"] == 3, st["trace_miss_reasons"]


def test_registered_dataclass_annotated_with_jax_array_is_reused(tmp_path):
    """``jax.Array`` in a user class's annotations is library code (it once made
    every call of a process with a registered dataclass miss)."""

    def scenario():
        out = []
        for n in (2, 2, 3, 3):
            out.append(_bits(jax.jit(lambda p: p.w * p.n)(Params(X, n))))
        return out

    _, _, stock_traces, traces, st = _compare(tmp_path, scenario)
    assert stock_traces == 4
    assert traces == 2 and st["trace_hits"] == 2


@jax.tree_util.register_pytree_node_class
class Node:
    """Registered with ``operator.methodcaller("tree_flatten")`` as its flatten."""

    SCALE = 1.0

    def __init__(self, a):
        self.a = a

    def tree_flatten(self):
        return (self.a,), None

    @classmethod
    def tree_unflatten(cls, aux, children):
        return cls(children[0] * cls.SCALE)


def test_pytree_node_class_is_reused_and_its_class_state_keyed(tmp_path):
    """A `register_pytree_node_class` node (its flatten a ``methodcaller``, once
    refused, which turned reuse off for the whole process): reused, and traced
    again when a class attribute its unflatten reads changes."""

    def scenario():
        out = []
        for s in (1.0, 1.0, 3.0, 3.0):
            Node.SCALE = s
            out.append(_bits(jax.jit(lambda n: n.a * 2)(Node(X))))
            out.append(_bits(jax.jit(lambda a: Node(a))(X).a))
        Node.SCALE = 1.0
        return out

    _, _, stock_traces, traces, st = _compare(tmp_path, scenario)
    assert stock_traces == 8
    assert st["trace_hits"] >= 2 and traces < stock_traces


@dataclasses.dataclass(frozen=True)
class Model:
    n: int

    def __call__(self, x):
        return x * SCALE * self.n


class Ops:
    factor = 1.0

    @staticmethod
    def f(x):
        return x * SCALE

    @classmethod
    def g(cls, x):
        return x * cls.factor


def test_code_reached_through_a_value_or_a_class_is_guarded(tmp_path):
    global SCALE

    def scenario():
        global SCALE
        out = []
        for v in (1.0, 1.0, 2.0):
            SCALE = v
            out.append(_bits(jax.jit(Model(1))(X)))
            gc.collect()
            out.append(_bits(jax.jit(lambda x: Ops.f(x))(X)))
            m = Model(2)
            out.append(_bits(jax.jit(lambda x: m(x))(X)))
        for v in (1.0, 1.0, 3.0):
            Ops.factor = v
            out.append(_bits(jax.jit(lambda x: Ops.g(x))(X)))
        SCALE, Ops.factor = 2.0, 1.0
        return out

    try:
        _, _, _, _, st = _compare(tmp_path, scenario)
    finally:
        SCALE, Ops.factor = 2.0, 1.0
    # each repeat before a change; then Ops.g's neither: the walk of Ops meets Ops.f,
    # whose global changed since it was first seen (JAX's identity caches may hold
    # a trace of that function object made with the old value): never recorded again
    assert st["trace_hits"] == 3, st["trace_miss_reasons"]


def test_reading_globals_through_globals_is_never_reused(tmp_path):
    def scenario():
        return [_bits(jax.jit(lambda x: x * globals()["SCALE"])(X)) for _ in range(2)]

    _, _, _, _, st = _compare(tmp_path, scenario)
    assert st["trace_miss_reasons"]["reads-globals()"] == 2


# ------------------------------------------------------------ found by a second review


def test_sets_in_their_iteration_order(tmp_path):
    def scenario():
        out = []
        for s in ({1.0, 9.0}, {9.0, 1.0}, frozenset({1.0, 9.0}), frozenset({9.0, 1.0})):
            out.append(_bits(jax.jit(lambda x: jnp.stack([x[0] * k for k in s]))(X)))
        return out

    _compare(tmp_path, scenario)


class Meta(type):
    scale = 1.0


class WithMeta(metaclass=Meta):
    pass


class CallDescriptor:
    def g(self, x):
        return x * 1.0

    def h(self, x):
        return x * 2.0

    __call__ = functools.partialmethod(g)


def test_metaclass_attributes_and_dunder_descriptors(tmp_path):
    def scenario():
        out = []
        for v in (1.0, 1.0, 2.0):
            Meta.scale = v
            out.append(_bits(jax.jit(lambda x: x * WithMeta.scale)(X)))
        Meta.scale = 1.0
        for fn in (CallDescriptor.g, CallDescriptor.h):
            CallDescriptor.__call__ = functools.partialmethod(fn)
            c = CallDescriptor()
            out.append(_bits(jax.jit(lambda x: c(x))(X)))
        CallDescriptor.__call__ = functools.partialmethod(CallDescriptor.g)
        return out

    _, _, _, _, st = _compare(tmp_path, scenario)
    assert st["trace_hits"] == 1  # Meta.scale = 1.0 again


def test_user_module_read_other_than_by_attribute_is_never_reused(tmp_path):
    def local_import(x):
        from tests.trace_mods import usercfg as m

        return x * m.lr

    def mk_closure():
        m = usercfg
        return lambda x: x * m.lr

    def scenario():
        out = []
        for v in (1.0, 2.0):
            usercfg.lr = v
            for f in (
                local_import,
                mk_closure(),
                lambda x: x * getattr(usercfg, "lr"),  # noqa: B009
                lambda x: x * usercfg.__dict__["lr"],
                lambda x: x * usercfg.lr,  # guarded: reused until it changes
            ):
                out.append(_bits(jax.jit(lambda x, f=f: f(x))(X)))
        usercfg.lr = 1.0
        return out

    _, _, _, _, st = _compare(tmp_path, scenario)
    reasons = st["trace_miss_reasons"]
    assert reasons["imports-user-module:tests.trace_mods"] == 2, reasons
    assert reasons["captured-module:tests.trace_mods.usercfg"] == 2, reasons
    # ``getattr(usercfg, "lr")`` (a constant name) is read, and guarded, as
    # ``usercfg.lr`` is: both traced again when ``lr`` changed
    assert reasons["global-changed:lr"] == 2, reasons
    assert reasons["reflection:__dict__"] == 2, reasons


def test_settings_tracing_reads_outside_the_trace_context(tmp_path):
    def scenario():
        out = []
        for impl in ("threefry2x32", "rbg", "threefry2x32"):
            jax.config.update("jax_default_prng_impl", impl)
            out.append(_bits(jax.jit(lambda x: jax.random.key_data(jax.random.PRNGKey(0)))(X)))
        return out

    try:
        _, _, _, _, st = _compare(tmp_path, scenario)
    finally:
        jax.config.update("jax_default_prng_impl", "threefry2x32")
    assert st["trace_hits"] == 1 and "config-changed" in st["trace_miss_reasons"]


def test_weakrefs_and_numpy_subclasses(tmp_path):
    def scenario():
        out = []

        def make(k):
            return lambda x: x * k

        for k in (1.0, 2.0):
            g = make(k)
            r = weakref.ref(g)
            out.append(_bits(jax.jit(lambda x: r()(x))(X)))
        for mask in ([[0, 1], [1, 0]], [[1, 0], [0, 1]]):
            m = np.ma.MaskedArray(np.ones((2, 2), np.float32), mask=mask)
            out.append(_bits(jax.jit(lambda x: x[:2, :2] * m.filled(0.0))(X)))
        return out

    _, _, _, _, st = _compare(tmp_path, scenario)
    assert st["trace_miss_reasons"]["numpy-subclass:MaskedArray"] == 2


def test_recorded_classes_are_bounded_by_the_memo(tmp_path):
    """Methods hold their class and the class holds its methods: pcache's record of
    a function's state must not keep either alive."""
    refs = []
    with pcache.enabled(tmp_path / "c", check=False):
        for i in range(40):

            @dataclasses.dataclass(frozen=True)
            class Local:
                n: float

                def __call__(self, x):
                    return x * self.n

            refs.append(weakref.ref(Local))
            jax.jit(Local(float(i)))(X)
            del Local
        _trace.MEMO.clear()
        gc.collect()
        assert sum(r() is not None for r in refs) == 0


# ------------------------------------------------------------ control and soundness tools


def test_switched_off_traces_every_call(tmp_path):
    _, _, _, traces, st = _compare(
        tmp_path, lambda: [_bits(_step_grad()) for _ in range(3)], trace_reuse=False
    )
    assert traces == 3 and st["trace_hits"] == 0 and st["trace_misses"] == 0
    assert st["memory_hits"] == 2  # the lowering key still serves the repeats


def test_check_mode_traces_a_reuse_and_compares(tmp_path):
    def scenario():
        return [_bits(s()) for s in (_step_grad, _step_grad, _step_partial, _step_partial)]

    _, _, _, traces, st = _compare(tmp_path, scenario, check=True)
    assert traces == 4 and st["trace_hits"] == 2


def test_check_mode_raises_on_a_false_hit(tmp_path, monkeypatch):
    """A key that missed what changed (simulated: every closure keyed as equal)."""

    def make(k):
        return lambda x: x * k

    monkeypatch.setattr(_walk.Walker, "_cell", lambda self, c: ("cell",))
    try:
        with pcache.enabled(tmp_path / "c", check=True, raise_errors=True):
            jax.jit(make(2.0))(X)
            with pytest.raises(pcache.CheckError, match="false hit"):
                jax.jit(make(3.0))(X)
    finally:
        monkeypatch.undo()
        _trace.forget_states()  # the states walked with the fake keys


def test_explain_logs_why_a_callable_was_not_reused(tmp_path, caplog):
    def make(k):
        return lambda x: x * k

    with caplog.at_level(logging.WARNING, logger="pcache"):
        with pcache.enabled(tmp_path / "c", explain=True):
            for k in (1.0, 2.0, 2.0):
                jax.jit(make(k))(X)
    lines = [r.getMessage() for r in caplog.records if "not reused" in r.getMessage()]
    assert any("closure-changed:" in m and "make.<locals>.<lambda>" in m for m in lines), lines


def test_memo_is_bounded_and_keeps_no_callable_alive(tmp_path):
    memo = _trace.TraceMemo(max_entries=3)
    with pcache.enabled(tmp_path / "c"):
        old, _trace.MEMO = _trace.MEMO, memo
        try:
            refs = []
            for k in range(6):
                fn = lambda x, k=k: x * k  # noqa: E731
                refs.append(weakref.ref(fn))
                jax.jit(fn)(X)
                del fn
            gc.collect()
            assert len(memo) == 3
            assert all(r() is None for r in refs)
        finally:
            _trace.MEMO = old


def test_an_unclassifiable_callable_traces_normally(tmp_path):
    class Callable:
        def __call__(self, x):
            _traced()
            return x * 2

    def scenario():
        return [_bits(jax.jit(Callable())(X)) for _ in range(2)]

    _, _, _, traces, st = _compare(tmp_path, scenario)
    assert traces == 2 and st["trace_miss_reasons"] == {
        "value:test_an_unclassifiable_callable_traces_normally.<locals>.Callable": 2
    }


# ------------------------------------------------------------ a real process, env var only

_PROG = textwrap.dedent(
    """
    import json, jax, jax.numpy as jnp
    import types
    n = types.SimpleNamespace(traces=0)
    def count(event, secs, **kw):
        n.traces += event == "/jax/core/compile/jaxpr_trace_duration" and kw["fun_name"] == "f"
    jax.monitoring.register_event_duration_secs_listener(count)
    def f(x):
        return jnp.mean(x @ x.T)
    x = jnp.ones((8, 8))
    outs = [jax.jit(jax.grad(f))(x) for _ in range(5)]
    import pcache
    st = pcache.stats()
    print(json.dumps({"traces": n.traces, "hits": st.get("trace_hits"),
                      "why": st.get("trace_miss_reasons"), "entries": st.get("trace_entries"),
                      "bits": [o.tobytes().hex() for o in map(jax.numpy.asarray, outs)][:1]}))
    """
)


@pytest.mark.parametrize("reuse", ["", "0"])
def test_zero_code_process(tmp_path, reuse):
    env = {k: v for k, v in os.environ.items() if not k.startswith("JAX_PCACHE_")}
    env["JAX_PCACHE_DIR"] = str(tmp_path / "c")
    env["JAX_PCACHE_RAISE_ERRORS"] = "1"
    if reuse:
        env["JAX_PCACHE_TRACE_REUSE"] = reuse
    out = subprocess.run(
        [sys.executable, "-c", _PROG], env=env, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    if reuse == "0":
        assert got["traces"] == 5 and got["hits"] == 0
    else:  # (by default a trace is recorded when its key is traced a second time)
        assert got["traces"] == 2 and got["hits"] == 3
        assert got["why"]["traced-once"] == 1, got["why"]  # (the second: recorded then)


_EAGER_PROG = textwrap.dedent(
    """
    import json, sys
    import jax, jax.numpy as jnp
    import pcache

    def f(x):
        with jax.ensure_compile_time_eval():  # (an op run eagerly while f is traced)
            c = jnp.sin(jnp.float32(2.0))
        return x + c

    def g(x):
        with jax.ensure_compile_time_eval():
            c = jnp.cos(jnp.float32(3.0))
        return x * c

    x = jnp.arange(4.0)
    order = [f, g] if sys.argv[1] == "fg" else [g, f]
    outs = [jax.jit(h)(x) for h in order]  # (each recorded at once: its own token)
    print(json.dumps({"compiles": pcache.stats()["compiles"],
                      "bits": sorted(o.tobytes().hex() for o in outs)}))
    """
)


def test_an_op_run_while_a_trace_is_recorded_is_keyed_as_anywhere_else(tmp_path):
    """A recorded trace runs under a recording token of its own (JAX's trace caches
    miss); an op run eagerly meanwhile must not carry it into its executable key: a
    process recording its traces in another order (a diffrax loss served from the
    store, another traced) compiled those ops again (found with
    ``JAX_PCACHE_TRACE_PERSIST``; here with in-process reuse alone)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("JAX_PCACHE_")}
    env.update(JAX_PCACHE_DIR=str(tmp_path / "c"), JAX_PCACHE_RAISE_ERRORS="1",
               JAX_PCACHE_TRACE_RECORD_AFTER="1")  # fmt: skip
    got = []
    for order in ("fg", "gf"):
        out = subprocess.run(
            [sys.executable, "-c", _EAGER_PROG, order],
            env=env, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert out.returncode == 0, out.stderr[-3000:]
        got.append(json.loads(out.stdout.strip().splitlines()[-1]))
    assert got[0]["compiles"] > 0 and got[1]["compiles"] == 0, got
    assert got[0]["bits"] == got[1]["bits"]
