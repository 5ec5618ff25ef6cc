"""Persisted traces holding an installed library's host callbacks (issue 27: diffrax
under equinox's default ``EQX_ON_ERROR=raise``, whose ``error_if`` binds a
``pure_callback`` over a closure it makes while tracing). A library here does what
equinox does; stored, such a callback is its module, code name and digest and its
cells' data (`pcache._lib_callbacks`), rebuilt in a new process from the library's
own file. Fresh processes, bitwise against stock JAX; what cannot be rebuilt is
refused by name."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest

from pcache._compat import jaxpr_codec
from tests import libsite
from tests.test_trace_persist import ROOT, phases, run, stored_traces
from tests.test_trace_persist import pytestmark as _persist_mark

pytestmark = _persist_mark

LIB = '''
import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

HELD = ["a message the library keeps"]
LAST = [None]  # (what the callback last raised: equinox's `_jit.last_error_info`)


class LibError(RuntimeError):
    pass


def _guarded(x, raises):
    def on_bad():
        return jax.pure_callback(raises, jax.ShapeDtypeStruct(x.shape, x.dtype), jnp.int32(0))

    return lax.cond(jnp.any(x > 10.0), on_bad, lambda: x)


def check(x, msg):
    """equinox's ``error_if``: messages and a trace-time stack in the closure."""
    msgs = (msg, "never")
    stack = ["at the caller", b"\\x00\\x01"]  # (a list made per call, as equinox's)

    def raises(i):
        LAST[0] = msgs[int(i)]
        raise LibError(f"{msgs[int(i)]} [{stack[0]}]")

    return _guarded(x, raises)


def check_scaled(x, k):
    """A callback that returns a value: its cell is a float."""

    def scaled(v):
        return np.asarray(v, np.float32) * k

    return jax.pure_callback(scaled, jax.ShapeDtypeStruct(x.shape, x.dtype), x)


def check_held(x):
    msgs = HELD  # (a list the library holds: a rebuilt cell would hold a copy)

    def raises(i):
        raise LibError(msgs[0])

    return _guarded(x, raises)


def check_counting(x):
    count = 0

    def raises(i):
        nonlocal count  # (rebinds its cell: one its siblings may share)
        count += 1
        raise LibError(str(count))

    return _guarded(x, raises)


def check_dict(x):
    cfg = {"msg": "in a dict"}

    def raises(i):
        raise LibError(cfg["msg"])

    return _guarded(x, raises)


def _counter():
    state = [0]

    def bump(i):
        state[0] += 1
        return np.asarray(i)

    def read():
        return state[0]

    return bump, read


BUMP, READ = _counter()  # (a callback the library keeps: its state spans traces)


def counted(x):
    return _guarded(x, BUMP)


SETTERS = []


def check_shared_setter(x):
    scale = [2.0]

    def raises(i):
        raise LibError(str(scale[0]))

    SETTERS.append(scale)  # (the cell's list, kept by the library too)
    return _guarded(x, raises)


def check_sibling(x):
    k = 2.0

    def raises(i):
        raise LibError(str(k))

    def set_k(v):  # (a closure the library keeps, rebinding the shared cell)
        nonlocal k
        k = v

    SETTERS.append(set_k)
    return _guarded(x, raises)


def check_reader(x):
    seen = [0]

    def raises(i):
        seen[0] += 1
        raise LibError("raised")

    SETTERS.append(lambda: seen[0])  # (a closure the library keeps, reading the cell)
    return _guarded(x, raises)


def check_pair(x):
    """Two callbacks sharing one cell over a list (equinox's ``raises`` and
    ``tpu_msg`` over its messages)."""
    msgs = ["first", "second"]

    def raises(i):
        raise LibError(msgs[0])

    def also(o, i):
        return np.asarray(o) + len(msgs)

    def on_bad():
        out = jax.pure_callback(raises, jax.ShapeDtypeStruct(x.shape, x.dtype), jnp.int32(0))
        return jax.pure_callback(also, jax.ShapeDtypeStruct(x.shape, x.dtype), out, 0)

    return lax.cond(jnp.any(x > 10.0), on_bad, lambda: x)


from jax.extend.core import Primitive
from jax.interpreters import mlir


def _plus(x):
    return x + 1.0


def _plus2(x):
    return x + 2.0


def _prim(name, f):
    p = Primitive(name)
    p.def_impl(f)
    p.def_abstract_eval(lambda x: x)
    mlir.register_lowering(p, mlir.lower_fun(f, multiple_results=False))
    return p


one_p, two_p = _prim("cblib_one", _plus), _prim("cblib_two", _plus2)
_LOWER = mlir.lower_fun(_plus, multiple_results=False)
same_a_p, same_b_p = Primitive("cblib_same_a"), Primitive("cblib_same_b")
for _p in (same_a_p, same_b_p):  # (two primitives with the very same rule objects)
    _p.def_impl(_plus)
    _p.def_abstract_eval(_plus)
    mlir.register_lowering(_p, _LOWER)
SAME_P = same_a_p  # (an alias sorting before both names)
CUR_P = one_p  # (an alias the library may rebind: the least name of either)


def use_two():  # (the library's own switch)
    global CUR_P
    CUR_P = two_p


def plus(x):
    return CUR_P.bind(x)


MARK = object()
CURRENT = MARK  # (an alias the library may rebind)
ACTIVE = LibError  # (an alias of a class)
EPOCH = object()


def new_epoch():  # (the library rebinds a name while the program runs)
    global EPOCH
    EPOCH = object()


G1, G2, G3, G4 = object(), object(), object(), object()


def renew():  # (and by a string: review 124)
    import sys

    globals()["G1"] = object()
    setattr(sys.modules[__name__], "G2", object())
    vars(sys.modules[__name__]).update(G3=object())
    exec("G4 = object()", globals())


FAST = "fast_mode"  # (a constant the library tests by identity; interned)


def check_mode(x, mode):
    def cb(v):
        return np.asarray(v) * (2.0 if mode is FAST else 3.0)

    return jax.pure_callback(cb, jax.ShapeDtypeStruct(x.shape, x.dtype), x)


class Gain:
    def __init__(self, v, table):
        self.v, self.table = v, table


jax.tree_util.register_pytree_node(Gain, lambda g: ((g.v,), g.table), lambda t, c: Gain(c[0], t))
TABLE = [2.0]  # (a list the library holds)


def gained(x, table):
    def cb(g):
        return np.asarray(g.v) * g.table[0]

    return jax.pure_callback(cb, jax.ShapeDtypeStruct(x.shape, x.dtype), Gain(x, table))


H1, H2, H3, H4 = object(), object(), object(), object()
_G1 = _NS = globals()  # (aliases of the namespace: review 127)
_X, _H = 1, globals()


def _ns():
    return globals()


def renew2(d=globals()):
    _NS["H1"] = object()
    _H["H2"] = object()
    _ns()["H3"] = object()
    d["H4"] = object()


_LIVE = __import__("weakref").WeakValueDictionary()


def registered(x):
    state = [0]

    def cb(i):
        state[0] += 1
        return np.asarray(i)

    _LIVE[len(_LIVE)] = cb  # (a registry of live callbacks: review 124)
    return _guarded(x, cb)


_KEEP = np.empty(2, dtype=object)  # (what the garbage collector does not see into)


def counted_np(x):
    state = [0]

    def bump(i):
        state[0] += 1
        return np.asarray(i)

    _KEEP[0] = bump  # (made per trace, but kept: review 123)
    return _guarded(x, bump)


def tallied(x):
    seen = [0]
    _KEEP[1] = seen  # (the cell's list, kept where no referrer shows it)

    def raises(i):
        seen[0] += 1
        raise LibError("tallied")

    return _guarded(x, raises)
'''

PROG = """
import os

import cblib

MSG = "too big" if os.environ["PHASE"] == "A" else "far too big"


def message(f):
    try:
        f().block_until_ready()
        got = "no error"
    except Exception as e:  # (JAX's runtime error, the library's text inside)
        s = str(e)
        got = s[s.find("LibError") :].splitlines()[0]
    return np.frombuffer(got.encode(), np.uint8)


def fixed(v):
    return cblib.check(v * 2.0, "fixed") + 1.0


def moving(v):
    return cblib.check(v, MSG) * 3.0


show("fixed", lambda: jax.jit(fixed)(x))
show("fixed-raises", lambda: message(lambda: jax.jit(fixed)(x * 100.0)))
show("moving-raises", lambda: message(lambda: jax.jit(moving)(x * 100.0)))
show("last", lambda: np.frombuffer(str(cblib.LAST[0]).encode(), np.uint8))
show("scaled", lambda: jax.jit(lambda v: cblib.check_scaled(v, 2.5) - 1.0)(x))
"""


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("cb")
    return libsite.install(root / "lib" / "site-packages", "cblib", LIB)


def test_a_library_callback_is_rebuilt_served_and_raises(site, tmp_path):
    """A stores the programs (their callbacks as data); B, a fresh process, is served
    them and shows what stock JAX shows: the values, the library's error raised by
    the rebuilt callback with its messages, the library's own state written by it,
    a float cell. The message a user module holds changed between A and B: that
    program traced again (its key), and B's message is B's. A check-mode B traces
    each and finds the stored trace equal to its own (the callbacks keyed by
    content)."""
    prog = tmp_path / "prog.py"
    prog.write_text(textwrap.dedent(PROG))
    env = {"PYTHONPATH": f"{ROOT}{os.pathsep}{site}"}
    cache = tmp_path / "c"
    a = run("scenario", str(prog), cache=cache, PHASE="A", **env)
    stock = run("scenario", str(prog), cache=None, PHASE="B", **env)
    checked = run("scenario", str(prog), cache=cache, PHASE="B", JAX_PCACHE_CHECK="1", **env)
    b = run("scenario", str(prog), cache=cache, PHASE="B", **env)
    shown = stock["digests"]["shown"]
    assert any("fixed-raises" in s and " EXC " not in s for s in shown), shown
    assert b["digests"]["shown"] == shown and checked["digests"]["shown"] == shown
    assert a["stats"]["trace_persist_writes"] >= 3, a["stats"]
    # served: ``fixed`` (twice: its jit objects are new), the scaled one; ``moving``'s
    # key holds its module's message: traced (and stored) by the first B
    assert b["digests"]["served"]["prog.py"] >= 4, b["stats"]
    assert checked["stats"]["trace_persist_misses"] == {"absent": 1}, checked["stats"]
    text = json.dumps(stored_traces(cache))
    assert '["CB", ["cblib", "check.<locals>.raises", ' in text
    assert '["y", "0001"]' in text  # (the bytes in the stack list)


@pytest.fixture
def cblib(site, monkeypatch):
    yield from libsite.imported(site, "cblib", monkeypatch)


@pytest.mark.parametrize(
    "name, reason",
    [
        ("check_counting", "cond.branches:pure_callback.callback:rebinds-free-variable"),
        ("check_dict", "cond.branches:pure_callback.callback:cell:dict"),
        ("counted", "cond.branches:pure_callback.callback:held"),
        ("check_shared_setter", "cond.branches:pure_callback.callback:held-list"),
        ("check_sibling", "cond.branches:pure_callback.callback:shared-cell-rebound"),
        ("check_reader", "cond.branches:pure_callback.callback:shared-cell-held"),
        ("counted_np", "cond.branches:pure_callback.callback:held"),
        ("tallied", "cond.branches:pure_callback.callback:held-list"),
        ("registered", "cond.branches:pure_callback.callback:weakly-held"),
    ],
)
def test_a_callback_that_cannot_be_rebuilt_is_refused_by_name(cblib, name, reason):
    cj = jax.jit(getattr(cblib, name)).trace(jnp.ones(3, jnp.float32)).jaxpr
    with pytest.raises(jaxpr_codec.Unencodable) as e:
        jaxpr_codec.encode(cj)
    assert e.value.reason == reason


def test_a_rebuilt_callback_is_the_library_code_over_the_same_data(cblib):
    """Encoded and decoded in one process: the rebuilt function is a new object of
    the library's code (named by its file), its globals the module's, its cells new
    cells over equal values (the list a new list)."""
    from pcache import _lib_callbacks

    cj = jax.jit(lambda v: cblib.check(v, "m")).trace(jnp.ones(3, jnp.float32)).jaxpr
    data = jaxpr_codec.encode(cj)
    assert data["callbacks"] is True
    back = jaxpr_codec.decode(data, __import__("pcache._canon_values").
                              _canon_values.jax_primitives_by_name())  # fmt: skip
    ((rebuilt, text),) = back.callbacks

    def callbacks(closed):
        out = []
        for e in closed.jaxpr.eqns:
            if e.primitive.name == "pure_callback":
                out.append(e.params["callback"])
            for v in e.params.values():
                for j in v if isinstance(v, tuple) else (v,):
                    if hasattr(j, "jaxpr") and hasattr(j, "consts"):
                        out += callbacks(j)
        return out

    (old_flat,), (new_flat,) = callbacks(cj), callbacks(back.closed)
    # (named before the lists below refer to the cells' lists too: then not fresh)
    assert _lib_callbacks.content(old_flat) == text
    old, new = old_flat.callback_func, new_flat.callback_func
    assert new is rebuilt and new is not old and new.__code__ == old.__code__
    assert new.__code__.co_filename == cblib.__file__ and new.__globals__ is vars(cblib)
    olds = [c.cell_contents for c in old.__closure__]
    news = [c.cell_contents for c in new.__closure__]
    assert news == olds
    assert all(a is not b for a, b in zip(news, olds, strict=True) if type(a) is list)


class _Mine:  # (the program's class)
    pass


def test_a_library_class_in_auxiliary_data_is_named_and_read_back(cblib):
    """equinox's ``EnumerationItem`` holds diffrax's ``RESULTS`` class in its
    auxiliary data (the tree of ``error_if``'s callback arguments): a library's class
    is stored by the name its module holds it under and read back as that very
    class; the program's class is refused."""
    from pcache import _out_tree
    from pcache._compat.jaxpr_arrays import Stale

    assert _out_tree.aux_data((cblib.LibError, 1)) == ["t", ["K", "cblib", "LibError"], ["i", 1]]
    assert _out_tree.aux_of(["K", "cblib", "LibError"]) is cblib.LibError
    with pytest.raises(ValueError):
        _out_tree.aux_data(_Mine)
    with pytest.raises(Stale):  # (a name that holds no library class: a miss)
        _out_tree.aux_of(["K", "cblib", "HELD"])


def test_two_callbacks_sharing_a_cell_share_one_again(cblib):
    """A cell two callbacks of one trace share (the messages' list) is stored once and
    rebuilt as one cell both rebuilt functions hold: what one changes, the other sees,
    as in the traced program."""
    from pcache._canon_values import jax_primitives_by_name

    cj = jax.jit(cblib.check_pair).trace(jnp.ones(3, jnp.float32)).jaxpr
    data = jaxpr_codec.encode(cj)
    assert data["cells"] == [["l", ["si", "first"], ["si", "second"]]]
    (a, _), (b, _) = jaxpr_codec.decode(data, jax_primitives_by_name()).callbacks
    assert a.__closure__[0] is b.__closure__[0]


def test_library_names_are_read_back_all_or_the_entry_is_stale(cblib, monkeypatch):
    """A library object in auxiliary data is stored under every name holding it and
    read back only where all of them still hold one object; a class by its own
    module and qualified name, never an alias (review 122: ``CURRENT`` and ``ACTIVE``
    sort before the object's own names)."""
    from pcache import _out_tree
    from pcache._compat.jaxpr_arrays import Stale

    enc = _out_tree.aux_data(cblib.MARK)
    assert enc == ["o", [["cblib", "CURRENT"], ["cblib", "MARK"]]]
    assert _out_tree.aux_of(enc) is cblib.MARK
    assert _out_tree.aux_data(cblib.LibError) == ["K", "cblib", "LibError"]
    for name in ("EPOCH", "G1", "G2", "G3", "G4", "H1", "H2", "H3", "H4"):  # (rebound)
        with pytest.raises(ValueError, match="aux-rebound"):
            _out_tree.aux_data(getattr(cblib, name))
    monkeypatch.setattr(cblib, "CURRENT", object())
    with pytest.raises(Stale):
        _out_tree.aux_of(enc)
    monkeypatch.setattr(cblib, "LibError", type("LibError", (Exception,), {}))
    with pytest.raises(Stale):
        _out_tree.aux_of(["K", "cblib", "LibError"])


def test_a_library_primitive_is_checked_under_every_name_holding_it(cblib, monkeypatch):
    """A stored jaxpr names a library primitive by its least name (``SAME_P``, an
    alias); the digest checked before serving covers every name holding it, so the
    alias rebound to another primitive, even one with the very same rules, is a miss
    (review 122; the names as a new process's first look at the library sees them)."""
    from pcache import _memos, _persist, _persist_key

    name = _persist_key.library_primitive_name(cblib.same_a_p)
    assert name == "lib:cblib:SAME_P"
    before = _persist._rules_digest(name)
    assert _persist._same_rules(((name, before),))
    monkeypatch.setattr(cblib, "SAME_P", cblib.same_b_p)
    _memos.clear()  # (as a new process: the library's names read afresh)
    # (a name rebound since its module's import names nothing: `pcache._snapshots`)
    assert _persist_key.library_primitive(name) is None
    assert _persist_key.library_primitive_name(cblib.same_b_p) is None
    assert not _persist._same_rules(((name, before),))


ALIAS = """
import os
import cblib

if os.environ["PHASE"] == "B":
    cblib.use_two()  # (before any trace: the library's names as B's index sees them)
show("plus", lambda: jax.jit(lambda v: cblib.plus(v) * 2.0)(x))
"""


def test_a_library_primitive_alias_rebound_in_a_new_process_is_a_miss(site, tmp_path):
    """A's jaxpr binds ``one_p`` under its least name ``CUR_P``; in B the library has
    pointed ``CUR_P`` at ``two_p`` (its own switch) before anything was traced: B
    traces (review 122; here the key's library rules by name differ already)."""
    prog = tmp_path / "alias.py"
    prog.write_text(ALIAS)
    _, stock, b = phases(prog, site, tmp_path / "c")
    assert b["digests"]["shown"] == stock["digests"]["shown"]
    assert b["digests"]["served"]["alias.py"] == 0, b["stats"]


def test_a_library_object_in_a_cell_or_tree_is_that_very_object(cblib):
    """A constant the library tests by identity (``mode is FAST``), a list it holds,
    in a callback's cell or a tree's auxiliary data, is stored by the names holding
    it and rebuilt as that very object (review 125: rebuilt by value, ``is`` failed
    and a list the library changes later came back a copy); a list the program holds
    in a callback's argument tree is refused."""
    from pcache import _out_tree
    from pcache._canon_values import jax_primitives_by_name

    def cells_of(f, *args):
        data = jaxpr_codec.encode(jax.jit(f).trace(jnp.ones(3, jnp.float32), *args).jaxpr)
        back = jaxpr_codec.decode(data, jax_primitives_by_name()).callbacks
        return data["cells"], [fn.__closure__ for fn, _ in back]

    cells, (closure,) = cells_of(lambda v: cblib.check_mode(v, cblib.FAST))
    assert cells == [["o", [["cblib", "FAST"]], ["si", "fast_mode"]]]
    assert closure[0].cell_contents is cblib.FAST
    cells, (closure,) = cells_of(cblib.check_held)
    assert cells == [["o", [["cblib", "HELD"]]]] and closure[0].cell_contents is cblib.HELD
    assert _out_tree.aux_data(cblib.FAST) == ["o", [["cblib", "FAST"]], ["si", "fast_mode"]]
    cells_of(lambda v: cblib.gained(v, cblib.TABLE))  # (the library's list: by name)
    mine = [3.0]
    with pytest.raises(jaxpr_codec.Unencodable, match="tree-held-list"):
        cells_of(lambda v: cblib.gained(v, mine))


def test_a_program_value_a_library_also_holds_is_read_back_only_while_equal(cblib, monkeypatch):
    """The program's own ``"fast_mode"`` is the very (interned) object the library
    holds as ``FAST``: stored by that name with its value, and read back only while
    the name still holds an equal value (review 126: the library pointed the name
    elsewhere and the program's literal came back changed)."""
    from pcache import _out_tree
    from pcache._compat.jaxpr_arrays import Stale

    enc = _out_tree.aux_data("fast_mode")
    assert enc == ["o", [["cblib", "FAST"]], ["si", "fast_mode"]]
    assert _out_tree.aux_of(enc) == "fast_mode"
    monkeypatch.setattr(cblib, "FAST", "slow_mode")
    with pytest.raises(Stale):
        _out_tree.aux_of(enc)
