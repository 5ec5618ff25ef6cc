"""Annotations in the walk's keys (`pcache._walk`): a function's or a class's, each
by `_walk_kinds._annotation`, and for one written as a string the values the names
in it have where ``typing.get_type_hints`` resolves it (review 183, 185)."""

from __future__ import annotations

import ast
import types
from typing import TYPE_CHECKING, Any

from pcache._introspect import inst_dict, is_a, items
from pcache._usercode import is_library_module, module_dict
from pcache._walk_kinds import _annotation

if TYPE_CHECKING:
    from pcache._walk import Walker


def annotations(w: Walker, ann: dict, g: Any) -> tuple:
    """A function's or class's annotations (`_annotation`), each written as a string
    (``from __future__ import annotations``, ``"DT"``) with the values the names in
    it have in ``g``, its module's globals: what ``typing.get_type_hints`` resolves
    it to (review 183: a library reading a field's type)."""
    out = []
    for k, a in items(ann):
        text = a if type(a) is str else getattr(a, "__forward_arg__", None)
        named: tuple = ()
        if type(text) is str:
            named = tuple((n, _global_in(w, g, n)) for n in _names_in(text))
        out.append((k, _annotation(w, a), named))
    return tuple(out)


def _global_in(w: Walker, g: Any, name: str) -> Any:
    """What ``name`` is in globals ``g``: a library module by its name (``typing``,
    read for ``typing.Literal``), else by the walk's rules; absent: a builtin."""
    v = g.get(name, _ABSENT) if type(g) is dict else _ABSENT
    if v is _ABSENT:
        return ("absent",)
    if is_a(v, types.ModuleType) and is_library_module(v):
        return ("module", str(module_dict(v).get("__name__")))
    return w.value(v)


_ABSENT = object()


def hint_globals(f: Any) -> Any:
    """Where ``typing.get_type_hints`` resolves a function's string annotations: the
    globals of the last function its ``__wrapped__`` chain reaches (review 185)."""
    for _ in range(64):
        d = inst_dict(f) if type(f) is types.FunctionType else None
        inner = d.get("__wrapped__") if type(d) is dict else None
        if inner is None:
            break
        f = inner
    return f.__globals__ if type(f) is types.FunctionType else {}


def _names_in(text: str) -> list:
    """The names an annotation's text loads, in order (none where it is no
    expression: ``get_type_hints`` would fail on it as well)."""
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    return sorted({n.id for n in ast.walk(tree) if type(n) is ast.Name})


__all__ = ["annotations", "hint_globals"]


def function_node(w: Any, f: Any, code: Any, g: dict, lib: bool, cells: Any, d: Any,
                  outer: bool) -> tuple:  # fmt: skip
    """What the walk keys a Python function by (`pcache._walk.Walker._function`);
    ``outer``: whether library code holds the function (what its own dict holds the
    program's code may read where not)."""
    inner, w.in_library = w.in_library, outer
    try:
        own = tuple((k, w.value(x)) for k, x in items(d)) if d else ()
    finally:
        w.in_library = inner
    return (
        "F",
        w.library_code(code) if lib else w.code(code),
        w.namespace(g),
        f.__name__,
        f.__qualname__,
        w.namespace(f.__builtins__),  # made in a namespace whose builtins changed
        f.__module__ if type(f.__module__) is str else w.value(f.__module__),
        f.__doc__ if type(f.__doc__) is str else w.value(f.__doc__),
        w.value(f.__defaults__),
        w.value(f.__kwdefaults__),
        tuple(w._cell(c) for c in cells) if cells else (),
        own,
        # what library code may read at trace time (singledispatch's register) of
        # a user function, or of a library's made at run time (a factory's closure
        # annotated by its argument: review 183; else the library's own state)
        annotations(w, f.__annotations__, hint_globals(f))
        if not lib or "<locals>" in code.co_qualname
        else (),
    )
