"""A library class by what it is, beside its module and qualified name.

The persisted key names a library's class by module and qualified name
(`pcache._persist_key.named`): the installed version fixes what that name's import
binds. But two processes may hold two classes under that one name: a library
function rebinds it (``use_second()``: ``Mode = _SECOND``) before pcache could copy
the namespace, by means no reading of the library's code enumerates (an alias of
``globals()`` or ``locals()``, a helper returning one, ``partial(operator.setitem,
...)``, a sourceless module: reviews 170-176). So the name comes with the class's
shape, read from the class itself in each process: the names its own module holds
it under (``Mode`` and ``_FIRST`` against ``Mode`` and ``_SECOND``), its bases and
metaclass by name, and each attribute of its own namespace by what it is (a
function by its code's content and first line, a constant by its value, a class by
its name, any other object by its type). Two classes of one name then share a key
only if their module holds both under the same names and their own attributes are
alike to that depth: one the library re-creates from the same source at the same
line, or that differ only in an object's state (a class attribute holding a mutable
instance: state libraries hold, documented). Any other library object named by a
module attribute comes with the names its module holds it under and what it is
(`looks`: ``CURRENT`` holding ``FAST`` against ``SLOW``).

JAX-free.
"""

from __future__ import annotations

import types
from typing import Any

import numpy as np

from pcache._introspect import cdict, is_a, items, names
from pcache._memos import memo
from pcache._persist_code import code_digest
from pcache._persist_pack import packed
from pcache._usercode import NoReuse

_FUNCTION = types.FunctionType
_SHAPES: dict = memo("persist.class_shape", {})  # id -> (class, namespace, sizes, shape)
_SCALARS = frozenset({type(None), bool, int, str, bytes})


def shape(cls: type, namespace: dict) -> str:
    """``cls`` by its shape (module docstring); ``namespace``: its module's. Memoized
    per class while its namespace and its module's hold as many names: what a library
    binds before pcache starts is read at the first key (a change after that, to a
    name, is `pcache._snapshots.unchanged`'s to see; to a class attribute, state)."""
    size = (len(cdict(cls)), len(namespace))
    e = _SHAPES.get(id(cls))
    if e is not None and e[0] is cls and e[1] is namespace and e[2] == size:
        return e[3]
    got = _shape(cls, namespace)
    if len(_SHAPES) > 8192:
        _SHAPES.clear()
    _SHAPES[id(cls)] = (cls, namespace, size, got)  # (kept alive: its id stays its own)
    return got


def _shape(cls: type, namespace: dict) -> str:
    holders = sorted(_key(k) for k, v in items(namespace) if v is cls)
    own = sorted(
        ((_key(k), _attr(v, 0)) for k, v in items(cdict(cls)) if k != "__doc__"),
        key=lambda kv: kv[0],
    )  # (not its docstring: a dataclass's holds its defaults' reprs, addresses in them)
    bases = [_name(b) for b in cls.__bases__]
    return packed(b"pcache-class-shape\n", (holders, own, bases, _name(type(cls))))


def _key(k: Any) -> str:
    return k if type(k) is str else f"?{type(k).__qualname__}"


def _name(t: type) -> tuple:
    _, qual, mod = names(t)
    return (mod if type(mod) is str else "?", qual if type(qual) is str else "?")


def looks(v: Any) -> tuple:
    """What a library object named by a module attribute is, as a class attribute
    is described (a function by its code and first line, a scalar by its value)."""
    return _attr(v, 0)


def _attr(v: Any, depth: int) -> tuple:
    t = type(v)
    if t in _SCALARS:
        return (t.__name__, v)
    if t is float:
        return ("f", np.float64(v).tobytes())  # (by its bits: every NaN, -0.0)
    if t is _FUNCTION:
        code = v.__code__
        try:
            digest = code_digest(code)
        except NoReuse:  # (a constant with no content encoding: by its position)
            digest = "?"
        return ("fn", digest, code.co_firstlineno)
    if t is staticmethod or t is classmethod:
        return (t.__name__, _attr(v.__func__, depth + 1))
    if t is property:
        return ("prop", *(_attr(f, depth + 1) for f in (v.fget, v.fset, v.fdel)))
    if is_a(v, type):
        return ("cls", _name(v))
    if (t is tuple or t is frozenset) and depth < 3 and len(v) <= 64:
        got = [_attr(x, depth + 1) for x in v]
        return (t.__name__, *(got if t is tuple else sorted(got, key=repr)))
    return ("obj", _name(t))


__all__ = ["looks", "shape"]
