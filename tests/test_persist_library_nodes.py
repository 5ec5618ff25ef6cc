"""Persisted traces of programs built on a library that works as equinox does
(issue 27's diffrax example): its pytree nodes carry auxiliary data (a sentinel the
library holds, static fields, a list, a nested tree), it defines a primitive of its
own with a tree definition among its params, and it holds a standard-library module
whose loaded submodules vary between processes. Installed into a ``site-packages``
directory with its ``RECORD``; every claim checked in fresh processes against stock
JAX, bitwise."""

from __future__ import annotations

import json
import os
import re
import textwrap
from pathlib import Path

import pytest

from tests import libsite
from tests.test_persist_identity import _as_stock_in_b
from tests.test_trace_persist import ROOT, phases, run, stored_traces
from tests.test_trace_persist import pytestmark as _persist_mark

pytestmark = _persist_mark

LIB = '''
import importlib  # noqa: F401  (held: pcache imports what files() would, review 117)

import jax
import jax.numpy as jnp
from jax.extend.core import Primitive
from jax.interpreters import ad, mlir


class _Missing:
    def __repr__(self):
        return "Missing"


MISSING = _Missing()
NAMES = ["n"]  # (a list the library holds)


class Node:
    """A value, and static fields its flatten puts in the auxiliary data."""

    def __init__(self, value, size, leaves=(), tree=None, extra=MISSING):
        self.value, self.size, self.leaves, self.tree, self.extra = value, size, leaves, tree, extra


def _flatten(n):
    return (n.value,), (n.extra, n.size, n.leaves, n.tree)


def _unflatten(aux, kids):
    n = object.__new__(Node)
    n.extra, n.size, n.leaves, n.tree = aux
    (n.value,) = kids
    return n


jax.tree_util.register_pytree_node(Node, _flatten, _unflatten)


class Flag:  # (auxiliary data that is a bare scalar)
    def __init__(self, value, on):
        self.value, self.on = value, on


jax.tree_util.register_pytree_node(Flag, lambda f: ((f.value,), f.on), lambda on, c: Flag(c[0], on))


def _twice(x, *, tree, k):
    return x * (2.0 + k + tree.num_leaves)


twice_p = Primitive("nodelib_twice")
twice_p.def_impl(_twice)
twice_p.def_abstract_eval(lambda x, **params: x)
mlir.register_lowering(twice_p, mlir.lower_fun(_twice, multiple_results=False))


def _twice_jvp(primals, tangents, *, tree, k):
    return twice_p.bind(*primals, tree=tree, k=k), tangents[0] * (2.0 + k + tree.num_leaves)


def other_jvp(primals, tangents, *, tree, k):  # (another rule the library offers)
    return twice_p.bind(*primals, tree=tree, k=k), tangents[0] * 100.0


ad.primitive_jvps[twice_p] = _twice_jvp


def _double(x):
    return x * 2.0


def _double_jvp(primals, tangents):  # (leaves no equation of its primitive)
    return primals[0] * 2.0, tangents[0] * 2.0


def other_double_jvp(primals, tangents):
    return primals[0] * 2.0, tangents[0] * 100.0


double_p = Primitive("nodelib_double")
double_p.def_impl(_double)
double_p.def_abstract_eval(lambda x: x)
mlir.register_lowering(double_p, mlir.lower_fun(_double, multiple_results=False))
ad.primitive_jvps[double_p] = _double_jvp


def checked(cfg, x, **params):  # (an abstract eval a program may make over its data)
    if cfg[0] == "strict" and x.shape[0] < 3:
        raise ValueError("too short")
    return x


check_p = Primitive("nodelib_check")
check_p.def_impl(lambda x: x)
check_p.def_abstract_eval(lambda x: x)
mlir.register_lowering(check_p, mlir.lower_fun(lambda x: x, multiple_results=False))


def twice(x, k=0):
    return twice_p.bind(x, tree=jax.tree_util.tree_structure(Node(0.0, 1)), k=k)
'''

PROG = """
import math

import jax.numpy as jnp
import nodelib



def _stepper(lib):
    def step(v):  # (a module a closure holds: what it reads from it, as a global's)
        tree = jax.tree_util.tree_structure((0, lib.Node(0.0, 2)))
        return lib.Node(lib.twice(v), 3, leaves=[1, 2], tree=tree)

    return step


step = _stepper(nodelib)


def plain(v):
    return nodelib.Node(nodelib.twice(v, k=1), 4, leaves=(5, 6))


def facts(n, want_leaves):
    want = jax.tree_util.tree_structure((0, nodelib.Node(0.0, 2)))
    same_tree = -1 if n.tree is None else n.tree == want
    flags = [n.extra is nodelib.MISSING, n.size, sum(n.leaves), type(n.leaves) is want_leaves,
             same_tree]
    return jnp.concatenate([n.value, jnp.array(flags, jnp.float32)])


def mk(f):  # (a new callable each time, equal to the last one)
    return jax.jit(lambda v: f(v))


first = mk(step)(x)
first.leaves.append(9)  # (the caller's list: no later caller sees it)
again = mk(step)(x)
show("step", lambda: facts(first, list))
show("again", lambda: facts(again, list))
show("fresh-list", lambda: jnp.array([again.leaves is not first.leaves]))
HELD = [7, 8]


def held(v):  # (lists that exist before the trace: stock hands back those very lists)
    return nodelib.Node(v * 2.0, 1, leaves=HELD, tree=nodelib.NAMES)


out = mk(held)(x)
HELD.append(9)
show("held", lambda: jnp.array([out.leaves is HELD, len(out.leaves), out.tree is nodelib.NAMES]))
def pair(v):  # (one list made while tracing, held by two nodes: review 118)
    shared = [4, 5]
    return nodelib.Node(v * 2.0, 1, leaves=shared), nodelib.Node(v * 3.0, 1, leaves=shared)


two = mk(pair)(x)
show("shared", lambda: jnp.array([two[0].leaves is two[1].leaves, len(two[1].leaves)]))
flags = [mk(lambda v, on=on: nodelib.Flag(v * 2.0, on))(x) for on in (True, 1, 2.5, -0.0)]
show("flags", lambda: jnp.array([[f.on, type(f.on) is bool, math.copysign(1, f.on)] for f in flags]))
show("plain", lambda: facts(mk(plain)(x), tuple))
show("plain-again", lambda: facts(mk(plain)(x), tuple))
show("plain-third", lambda: facts(mk(plain)(x), tuple))
"""


SWAP = """
import os
import jax
import nodelib
from jax.interpreters import ad

if os.environ["PHASE"] == "B":  # (the program sets library primitives' rules)
    ad.primitive_jvps[nodelib.twice_p] = nodelib.other_jvp
    ad.primitive_jvps[nodelib.double_p] = nodelib.other_double_jvp
show("grad", lambda: jax.jit(jax.grad(lambda v: nodelib.twice(v).sum()))(x))
show("grad2", lambda: jax.jit(jax.grad(lambda v: nodelib.double_p.bind(v).sum()))(x))
"""


AEVAL = """
import functools
import os
import jax
import nodelib

CFG = ["lax"]  # (the program's list, read by the library primitive's abstract eval)
nodelib.check_p.def_abstract_eval(functools.partial(nodelib.checked, CFG))
show("first", lambda: jax.jit(lambda v: nodelib.check_p.bind(v) + 1.0)(x))
if os.environ["PHASE"] == "B":
    CFG[0] = "strict"
show("main", lambda: jax.jit(lambda v: nodelib.check_p.bind(v) * 2.0)(x[:2]))
"""


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("nodes")
    site = libsite.install(root / "lib" / "site-packages", "nodelib", LIB)
    prog = root / "prog.py"
    prog.write_text(textwrap.dedent(PROG))
    (root / "swap.py").write_text(SWAP)
    (root / "aeval.py").write_text(AEVAL)
    return site, prog


def test_library_nodes_primitives_and_held_modules_are_served(installed, tmp_path):
    """A stores both programs; B (which imported a submodule of the standard-library
    module the library holds) is served both, and prints what stock JAX prints:
    the sentinel is the library's own object, the list a new one per trace (not
    the list an earlier caller changed), the nested tree and the primitive's
    params as traced."""
    site, prog = installed
    cache = tmp_path / "c"
    a, stock, b = phases(prog, site, cache)
    shown = stock["digests"]["shown"]
    assert not any(" EXC " in s for s in shown), shown
    assert b["digests"]["shown"] == shown
    # stored as data the schema describes: the node class and sentinel by name, the
    # library's primitive by the name its module holds it under
    text = json.dumps(stored_traces(cache))
    assert re.search(r'\["C", "nodelib", "Node", "[0-9a-f]{64}", \["t", \["o", \[\["nodelib", '
                     r'"MISSING"\]\]\], \["i", 3\], \["l",', text)  # fmt: skip
    assert '"lib:nodelib:twice_p"' in text and '["PT", ' in text
    # A: no tree with a list was recorded for equal callables (``again`` traced); the
    # ones holding lists the program and the library hold (review 117) or one list
    # twice (review 118) were not stored
    assert a["stats"]["trace_unrecorded"] == {"output-tree-mutable": 4}, a["stats"]
    # (one list twice: refused as an object in two places, `_out_tree.note`, review 128)
    misses = a["stats"]["trace_persist_misses"]
    assert misses["unstored:out-tree:held-list"] == 1, misses
    assert misses["unstored:shared-object:list"] == 1, misses
    # B: every call served, the tree with a list decoded afresh for each jit object
    # (never through the in-process memo), the tuple one recorded in process
    misses = b["stats"]["trace_persist_misses"]  # (``held``'s: looked up, traced, refused)
    assert misses == {
        "absent": 2,
        "unstored:out-tree:held-list": 1,
        "unstored:shared-object:list": 1,
    }, misses
    assert b["digests"]["served"]["prog.py"] >= 3, b["stats"]
    # (a first call of a callable on new code is served alone, `_persist.first_sighting`:
    # the second ``step``, ``held`` and ``pair`` asked to be recorded in process; the
    # second ``plain`` was, and the third is served it)
    assert b["stats"]["trace_unrecorded"].get("output-tree-mutable") == 3, b["stats"]
    assert b["stats"]["trace_hits"] == 1, b["stats"]


def test_a_list_in_an_output_tree_is_never_shared_in_process(installed, tmp_path):
    """Without persisted traces: the tree holding a list is not recorded for equal
    callables (each traces, as stock JAX does); the one of immutable data is."""
    site, prog = installed
    env = {"PYTHONPATH": f"{ROOT}{os.pathsep}{site}", "JAX_PCACHE_TRACE_PERSIST": "0"}
    env["JAX_PCACHE_TRACE_RECORD_AFTER"] = "1"
    stock = run("scenario", str(prog), cache=None, PHASE="A", **env)
    got = run("scenario", str(prog), cache=tmp_path / "c", PHASE="A", **env)
    assert got["digests"]["shown"] == stock["digests"]["shown"]
    assert got["stats"]["trace_unrecorded"] == {"output-tree-mutable": 4}, got["stats"]
    assert got["stats"]["trace_hits"] == 2, got["stats"]


def test_a_library_primitive_whose_rule_the_program_set_traces_again(installed, tmp_path):
    """Reviews 118, 119: B sets the JVP rules of the library's primitives to other
    functions of the library's; the jaxprs A stored hold A's rules' results (a gradient
    of 3 and of 2 per element, where B's rules give 100), and the second rule leaves no
    equation of its primitive in the jaxpr. Every library primitive's rules are in the
    key (and a stored jaxpr's own are checked when read): B traces both."""
    site, prog = installed
    env = {"PYTHONPATH": f"{ROOT}{os.pathsep}{site}"}
    swap, cache = str(prog.parent / "swap.py"), tmp_path / "c"
    a = run("scenario", swap, cache=cache, PHASE="A", **env)
    stock = run("scenario", swap, cache=None, PHASE="B", **env)
    b = run("scenario", swap, cache=cache, PHASE="B", **env)
    assert b["digests"]["shown"] == stock["digests"]["shown"] != a["digests"]["shown"]
    assert a["stats"]["trace_persist_writes"] >= 1, a["stats"]
    assert b["digests"]["served"]["swap.py"] == 0, b["stats"]


def test_a_library_primitive_rule_over_program_data_is_the_program_s(installed, tmp_path):
    """Review 120: the program makes a library primitive's abstract eval a partial
    over its own list, then changes the list in place between calls (in B only): the
    rules' key, memoized by their objects, kept A's; B was served a trace stock JAX
    refuses. Such a primitive is now the program's (as a rule-table entry over its
    data already was): neither reused nor stored."""
    site, prog = installed
    env = {"PYTHONPATH": f"{ROOT}{os.pathsep}{site}"}
    aeval, cache = str(prog.parent / "aeval.py"), tmp_path / "c"
    run("scenario", aeval, cache=cache, PHASE="A", **env)
    stock = run("scenario", aeval, cache=None, PHASE="B", **env)
    b = run("scenario", aeval, cache=cache, PHASE="B", **env)
    assert b["digests"]["shown"] == stock["digests"]["shown"]
    assert "main EXC ValueError" in stock["digests"]["shown"]
    assert b["digests"]["served"]["aeval.py"] == 0, b["stats"]


RULE_LIB = """
from jax._src.ad_util import stop_gradient_p
from jax.interpreters import ad


def stop_gradient_transpose(ct, x):  # (lineax's, set on JAX's primitive at import)
    return (ct,)


ad.primitive_transposes[stop_gradient_p] = stop_gradient_transpose
"""

RULE_PROG = """
import os

import pcache

if os.environ.get("JAX_PCACHE_DIR"):
    pcache.enable(trace_persist=True)  # (before the library's import)
import rulelib  # noqa: F401


def f(v):
    return jax.linear_transpose(lambda u: jax.lax.stop_gradient(u) * 2.0, v)(v)[0]


show("transposed", lambda: jax.jit(f)(x))
"""


def test_a_rule_an_installed_library_sets_on_jax_s_primitive_persists(tmp_path):
    """Enabled before a library that sets a rule of one of JAX's own primitives is
    imported (lineax's ``stop_gradient`` transpose: diffrax's example), the override is
    named by the library's distribution, module, function and code: a new process
    loads the executable and is served the trace, bitwise stock; another rule function
    is another key."""
    from pcache import _canon, _canon_rules

    site = libsite.install(tmp_path / "lib" / "site-packages", "rulelib", RULE_LIB)
    prog = tmp_path / "prog.py"
    prog.write_text(textwrap.dedent(RULE_PROG))
    a, stock, b = phases(prog, site, tmp_path / "c")
    assert a["digests"]["shown"] == stock["digests"]["shown"] == b["digests"]["shown"]
    assert b["digests"]["served"]["prog.py"] == 1, b["stats"]
    assert b["stats"]["compiles"] == 0, b["stats"]
    # (in process: an installed library's function by its distribution and code; only
    # for an override, not for a primitive's own lowering rule, which stays traced)
    import filelock

    fn = _canon_rules._describe_rule
    one, other = filelock.Timeout.__str__, filelock.Timeout.__repr__
    assert fn(one, 0) is None and fn(other, 0) is None
    got = fn(one, 0, libs=True)
    assert got.startswith("fn:lib:filelock-") and ":Timeout.__str__:" in got
    assert fn(other, 0, libs=True) not in (None, got)
    ns: dict = {}
    exec(compile("def t(ct, x):\n    return (ct,)\n", "<rule>", "exec"), ns)
    assert fn(ns["t"], 0, libs=True) is None  # (no installed library's code)
    assert _canon_rules.overrides_key(_canon.jax_primitive_name)[1]


SWAPPED_TUPLE = """
import collections

P = collections.namedtuple("P", "a b")
P.total = lambda self: self.a + self.b
_ORIG = P


def make(a):
    return _ORIG(a * 2.0, a)


def swap():  # (the name points at another NamedTuple of that name and fields)
    global P
    P = collections.namedtuple("P", "a b")
    P.total = lambda self: self.a - self.b
"""

SWAPPED_TUPLE_PROG = """
import collections
import os

import tup_lib
import tup_prog

if os.environ["PHASE"] == "B":
    tup_lib.swap()  # (the library's API)
    Q = collections.namedtuple("P", "a b", module="tup_prog")  # (the program's own)
    Q.total = lambda self: self.a - self.b
    tup_prog.P = Q


def lib(a):
    return tup_lib.make(a)


def prog(a):
    return tup_prog.make(a)


show("library", lambda: jax.jit(lib)(x).total())
show("program", lambda: jax.jit(prog)(x).total())
"""


def test_a_namedtuple_an_output_tree_names_is_the_class_its_import_bound(tmp_path):
    """A stored output tree names a library's NamedTuple by module and qualified name:
    read back only while that name holds what its import bound, the very class of
    that shape (`_class_shape.stamp`): the library's API, or the program, may point
    the name at another NamedTuple of that name and fields (review 179), and B must
    hand back the class its trace returns, as stock JAX does."""
    site = libsite.install(tmp_path / "lib" / "site-packages", "tup_lib", SWAPPED_TUPLE)
    libsite.install(site, "tup_prog", SWAPPED_TUPLE)
    prog = tmp_path / "prog.py"
    prog.write_text(SWAPPED_TUPLE_PROG)
    a, stock, b = phases(prog, site, tmp_path / "c")
    assert b["digests"]["shown"] == stock["digests"]["shown"] == a["digests"]["shown"]
    assert not any(" EXC " in s for s in stock["digests"]["shown"])


SCHEMA = """
import typing


def cast_like(schema, name, a):  # (a field's declared type, as a schema library reads it)
    return a.astype(typing.get_type_hints(schema)[name])


def make_cast(dt):  # (a factory: its function's annotation is its argument)
    def cast(a) -> dt:
        return a * 2

    return cast


def apply(f, a):
    return f(a).astype(f.__annotations__["return"])


def apply_hinted(f, a):
    return f(a).astype(typing.get_type_hints(f)["return"])


def n_subclasses(cls, a):  # (a plugin count: the classes the program derived)
    return a * (1 + len(cls.__subclasses__()))
"""

ANNOTATED_PROG = """
import dataclasses
import os

import schemalib

DT = jnp.float16 if os.environ["PHASE"] == "A" else jnp.int32
CAST = schemalib.make_cast(DT)


class Fields:
    w: DT


def act(a) -> "DT":  # (a name in a string, as under ``from __future__ import annotations``)
    return a * 2


@dataclasses.dataclass(frozen=True)
class Cfg:
    w: "DT" = None


show("closure", lambda: jax.jit(lambda a: schemalib.apply(CAST, a))(x))
show("class", lambda: jax.jit(lambda a: schemalib.cast_like(Fields, "w", a))(x))
show("string", lambda: jax.jit(lambda a: schemalib.apply_hinted(act, a))(x))
show("dataclass", lambda: jax.jit(lambda a, c: schemalib.cast_like(type(c), "w", a),
                                  static_argnums=1)(x, Cfg()))


class Base:
    pass


if os.environ["PHASE"] == "B":

    class Extra(Base):
        pass


show("subclasses", lambda: jax.jit(lambda a: schemalib.n_subclasses(Base, a))(x))

# (a string annotation resolved where the ``__wrapped__`` chain ends: review 185)
import sys
import tempfile

where = tempfile.mkdtemp()
with open(os.path.join(where, "wrapmod.py"), "w") as fh:
    fh.write("def outer(a) -> 'DT':\\n    return a * 2\\n")
sys.path.insert(0, where)
import wrapmod


def inner(a):
    return a * 2


wrapmod.outer.__wrapped__ = inner
show("wrapped", lambda: jax.jit(lambda a: schemalib.apply_hinted(wrapmod.outer, a))(x))
"""


def test_annotations_a_library_reads_are_in_the_key(tmp_path):
    """A library may read annotations as data (a schema's field types, a factory's
    closure annotated by its argument, ``typing.get_type_hints`` resolving a name in a
    string against the globals where its ``__wrapped__`` chain ends), and the
    subclasses of a class the program hands it: each keyed, with the values of the
    names a string annotation holds (reviews 183, 185)."""
    site = libsite.install(tmp_path / "lib" / "site-packages", "schemalib", SCHEMA)
    _as_stock_in_b(site, ANNOTATED_PROG, tmp_path)
