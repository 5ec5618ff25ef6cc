"""What JAX's rule and type-handler tables hold, in the persisted key: entries told
apart by what they are, never by a name two of them share (review 160). Fresh
processes, bitwise against stock JAX (`tests.test_persist_identity`'s phases)."""

from __future__ import annotations

from tests import libsite
from tests.test_persist_identity import _as_stock_in_b, _submodule
from tests.test_trace_persist import pytestmark as _persist_mark

pytestmark = _persist_mark

NESTED_NAMES = """
import numpy as np
from jax._src import dtypes

from . import sub as _sub  # (its class F: module "scal.sub", qualified name "F")


class sub:  # (its F: module "scal", qualified name "sub.F")
    class F(float):
        pass


OTHER = _sub.F
dtypes.python_scalar_types_to_dtypes[sub.F] = np.dtype("float16")
dtypes.python_scalar_types_to_dtypes[OTHER] = np.dtype("float16")
"""

NESTED_PROG = """
import os

from jax._src import dtypes

import scal

jax.jit(lambda v: v + 1)(x)
T = scal.sub.F if os.environ["PHASE"] == "A" else scal.OTHER
dtypes.python_scalar_types_to_dtypes[T] = np.dtype("int32")
show("registered", lambda: jax.jit(lambda v: v.astype(jnp.result_type(scal.sub.F(2.5))))(x))
"""


def test_two_classes_whose_dotted_names_join_alike_are_told_apart(tmp_path):
    """``scal`` + ``sub.F`` and ``scal.sub`` + ``F`` are two classes: a table entry's
    key names a class by its module and qualified name, not their dotted join."""
    site = libsite.install(tmp_path / "lib" / "site-packages", "scal", NESTED_NAMES)
    _submodule(site, "scal/sub.py", "class F(float):\n    pass\n")
    _as_stock_in_b(site, NESTED_PROG, tmp_path)


LISTED = """
from jax import lax
from jax._src import core


def _make(name):
    p = core.Primitive(name)
    p.def_impl(lambda x: x)
    p.def_abstract_eval(lambda x: x)
    return p


PRIMS = [_make("cp"), _make("cp")]  # (kept in a list only: no name of their own)


def jvp_sin(primals, tangents):
    (x,), (t,) = primals, tangents
    return lax.sin(x), lax.cos(x) * t


def jvp_double(primals, tangents):
    (x,), (t,) = primals, tangents
    return 2.0 * x, 2.0 * t
"""

LISTED_PROG = """
import os

from jax._src.interpreters import ad

import cprims

a, b = cprims.jvp_sin, cprims.jvp_double
if os.environ["PHASE"] == "B":
    a, b = b, a
ad.primitive_jvps[cprims.PRIMS[0]] = a
ad.primitive_jvps[cprims.PRIMS[1]] = b
show("g", lambda: jax.jit(jax.grad(lambda v: cprims.PRIMS[0].bind(v).sum()))(x))
"""


def test_library_primitives_of_one_name_with_other_rules_are_not_persisted(tmp_path):
    """Two library primitives no module names, of one name, with their rules swapped
    between the processes: no key tells which has which, so nothing is stored."""
    site = libsite.install(tmp_path / "lib" / "site-packages", "cprims", LISTED)
    b = _as_stock_in_b(site, LISTED_PROG, tmp_path)
    assert b["stats"]["trace_persist_misses"].get("persist-ambiguous-primitives"), b["stats"]


def test_a_jax_function_in_a_table_is_described_by_its_constants_too(monkeypatch):
    """Two of JAX's functions at one line with one bytecode and other constants
    (``lambda x: x * 2, lambda x: x * 3``) are other rules: a description by the
    bytecode alone named both alike. (Code JAX's file does not define is no JAX
    function at all, `is_library_code`: stood in for here, where the two are made.)"""
    import types

    from jax._src.lax import lax

    from pcache import _canon_rules
    from pcache._canon_rules import _describe_function

    monkeypatch.setattr(_canon_rules, "is_library_code", lambda g, code: True)

    code = lax.concatenate.__code__  # (JAX's own code: a copy compiled here is not)
    ints = [i for i, c in enumerate(code.co_consts) if type(c) is int]
    consts = list(code.co_consts)
    consts[ints[0]] += 1
    one = types.FunctionType(code, lax.__dict__)
    other = types.FunctionType(code.replace(co_consts=tuple(consts)), lax.__dict__)
    assert other.__code__.co_code == one.__code__.co_code
    a, b = _describe_function(one, 0, False), _describe_function(other, 0, False)
    assert a is not None and b is not None and a != b
