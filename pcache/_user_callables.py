"""Whether calling an object may run user code: what registries and a trace's late
code are judged by (`pcache._guards`, `pcache._trace`)."""

from __future__ import annotations

import builtins
import functools
import operator
import types
import weakref
from typing import Any

from pcache import _compat
from pcache._introspect import cell_bound, fields, is_a
from pcache._usercode import is_library_code, is_library_type, plain_partial

_PARTIAL_FIELDS = tuple(functools.partial.__dict__[n].__get__ for n in ("func", "args", "keywords"))
_RB = vars(builtins)  # (Python's own builtins: a function run with others is the program's)
_FUNCTION = types.FunctionType


#: callables (none can be subclassed) that run no code of their own: a builtin, and
#: the standard library's getters by name (a method or attribute of what they are
#: given, whose type decides: JAX's ``register_pytree_node_class`` registers
#: ``methodcaller("tree_flatten")``). (A module or primitive is no callable unless
#: its class gives it a ``__call__``: then it is judged as any other callable.)
_NOT_CODE = frozenset(
    {types.BuiltinFunctionType, operator.methodcaller, operator.attrgetter, operator.itemgetter}
)
_PROXIES = frozenset({weakref.ProxyType, weakref.CallableProxyType})


def user_code(obj: Any, depth: int = 0, seen: set | None = None) -> bool:
    """Whether calling ``obj`` may run user code (anything but installed library
    code), looking through closures, partials and JAX's wrapped functions."""
    if depth > 8:
        return True
    seen = set() if seen is None else seen
    if id(obj) in seen:
        return False
    seen.add(id(obj))
    t = type(obj)
    if t is _FUNCTION:
        if not is_library_code(obj.__globals__, obj.__code__) or obj.__builtins__ is not _RB:
            return True
        inner = [c.cell_contents for c in obj.__closure__ or () if cell_bound(c)]
        inner += list(obj.__defaults__ or ())
    elif t in _PROXIES:
        return True  # (calls through to what it refers to, maybe nothing any more)
    elif plain_partial(obj):  # (its fields as partial.__call__ reads them)
        inner = [f(obj) for f in _PARTIAL_FIELDS]
        inner = [inner[0], *inner[1], *inner[2].values()]
    elif t is types.MethodType:
        inner = [obj.__func__, obj.__self__]
    elif t is tuple or t is list or is_a(obj, tuple):
        inner = list(obj)
    elif t is dict:
        inner = list(obj.values())
    elif is_library_type(t) and hasattr(obj, "f_transformed") and hasattr(obj, "f"):
        # JAX's WrappedFun
        inner = [obj.f, obj.f_transformed]
    elif t is _compat.PjitFunction:  # (review 78; its callee as the C++ object holds it)
        inner = None if (parts := _compat.jit_parts(obj)) is None else [parts[0]]
    elif t is _compat.LoweringRuleEntry:
        inner = [obj.rule]
    elif is_a(obj, _compat.CUSTOM_DERIVATIVE_TYPES):
        inner = fields(obj)
    elif is_a(obj, type):
        return not is_library_type(obj)
    elif callable(obj) and t not in _NOT_CODE and t not in _compat.OPAQUE_TYPES:
        if not is_library_type(t):
            return True
        # A library object that may wrap user code (custom_vmap's ClosedRule holds
        # the user's rule): what it holds decides.
        inner = fields(obj)
    else:
        return False  # data
    if inner is None:
        return True  # what it holds cannot be read: taken as user code
    return any(user_code(x, depth + 1, seen) for x in inner)


__all__ = ["user_code"]
