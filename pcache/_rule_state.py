"""What a rule JAX runs while tracing holds besides code.

A registered rule (a primitive's JVP, batching, transpose, abstract-evaluation or
lowering rule; a pytree node's flatten and unflatten) that is library code can
still be made over data: ``lower_fun(partial(jnp.multiply, F))`` computes with
``F``, which the program can change in place while the rule stays the same object.
`holds_state` says whether a rule holds anything beyond code and immutable scalars;
`holds_program_data` whether what it holds could be the program's, and not only
what JAX's own rules hold (objects installed libraries hold, configuration
decorators over a constant): a rule over the program's data registered on one of
JAX's own primitives is walked like a user primitive's (review 80).
"""

from __future__ import annotations

import functools
import operator
import types
from collections.abc import Callable
from typing import Any

import numpy as np

from pcache import _compat
from pcache._holders import library_held
from pcache._introspect import cell_bound, is_a, type_ids

_FUNCTION = types.FunctionType
_GETTERS = (operator.attrgetter, operator.itemgetter, operator.methodcaller)
_STATELESS = type_ids((type(None), bool, int, float, complex, str, bytes, type(...)))


def _any_data(obj: Any) -> bool:
    return True


def holds_state(obj: Any, depth: int = 0, data: Callable[[Any], bool] = _any_data) -> bool:
    """Whether ``obj`` (a rule: a function, a partial) holds anything beyond code and
    immutable scalars, through its closure, defaults and arguments: data a trace
    reads that can change while the rule stays the same object (each such object
    counted only if ``data`` says so)."""
    if depth > 8:
        return True
    t = type(obj)
    if id(t) in _STATELESS:  # (by identity: `_introspect.by_id`)
        return False

    def held(*xs: Any) -> bool:
        return any(holds_state(x, depth + 1, data) for x in xs)

    if t is _FUNCTION:
        inner = [c.cell_contents for c in obj.__closure__ or () if cell_bound(c)]
        return held(*inner, *(obj.__defaults__ or ()), *(obj.__kwdefaults__ or {}).values())
    if t is functools.partial:
        return held(obj.func, *obj.args, *obj.keywords.values())
    if t is tuple or t is frozenset:
        return held(*obj)
    if t is _compat.LoweringRuleEntry:  # frozen, slotted: a rule and a bool
        return held(obj.rule, obj.inline)
    if t in _GETTERS:  # (C objects: a name and arguments, as their reducer gives them)
        return held(t.__reduce__(obj))
    if t is types.BuiltinFunctionType:  # a builtin, or a method bound to its object
        b = getattr(obj, "__self__", None)  # (``FLAT.get``: review 34)
        return not (b is None or is_a(b, types.ModuleType)) and held(b)
    if is_a(obj, (type, types.ModuleType, _compat.Primitive, np.dtype)):
        return False  # (a dtype: immutable)
    if t is types.MethodType:
        return held(obj.__self__, obj.__func__)
    return data(obj)  # lists, dicts, arrays, objects: state


def _program_data(obj: Any) -> bool:
    t = type(obj)
    if t is _compat.CONFIG_DECORATOR:  # (slotted: the option, its value)
        return _program_data(obj.state) or holds_state(obj.new_val, 1, _program_data)
    return not library_held(obj, t)


def holds_program_data(rule: Any) -> bool:
    """Whether ``rule`` holds state (`holds_state`) beyond objects an installed
    library holds as a module or class attribute (custom_partitioning instances)
    and JAX's configuration decorators over a constant (svd's JVP rule, made under
    ``@default_matmul_precision("float32")``): all that JAX's own rules hold. A rule
    holding anything else was made by the program, over data it may change."""
    return holds_state(rule, 0, _program_data)


__all__ = ["holds_program_data", "holds_state"]
