"""Code an installed library generates at run time, proven by generating it again.

Equinox (0.13) makes each ``Module`` class's pytree flatten and unflatten with
``exec`` into a fresh namespace (``equinox._module._flatten``'s
``generate_flatten_functions``): no module holds them and they read
``obj.__dict__``, so the walker took them as user code doing reflection and every
program with an equinox module was never reused (`pcache._guards.registry_key`
walks every user pytree node's functions for every key).

Such a function is library code when the installed generator (itself proven library
code), called again for the same class and fields, makes equal code (every field
that decides what it does, its file name and qualified name included) reading
the same objects: every name its code loads from its namespace is bound there to
the very object the generator binds, or unbound in both, and it has no closure or
defaults. What it does is then what the library makes for that class; the class
itself is keyed by the walk as any user class. A namespace entry rebound later
undoes the proof (`proven` compares them on every call). Anything else (another
generator version, another class, a name bound to another object) proves nothing:
the function stays user code, walked and refused as before. JAX-free: the caller
hands the registry's entries.
"""

from __future__ import annotations

import dataclasses
import functools
import sys
import types
from typing import Any

from pcache._introspect import items, names
from pcache._usercode import (
    UNBOUND,
    generated_by,
    is_library_code,
    is_library_module,
    module_dict,
    proven_code,
)

_FUNCTION = types.FunctionType
_EQX = "equinox._module._flatten"
_TRIED: dict = {}  # (id(node type), id(flatten)) -> (type, fn): with `proven_code`'s


def prove_nodes(tree: dict) -> None:
    """`prove_node` for every node type of JAX's pytree registry ``tree``."""
    for t, entry in items(tree):
        prove_node(t, entry)


def prove_node(t: type, entry: Any) -> None:
    """Prove the flatten and unflatten JAX's registry holds for node type ``t``, where
    equinox generated them (`proven_code` records what is proven)."""
    try:
        flat, unflat = entry[0], entry[1]
    except (TypeError, IndexError, KeyError):
        return
    e = _TRIED.get((id(t), id(flat)))
    if e is not None and e[0] is t and e[1] is flat:
        if not e[2] or all(generated_by(f.__globals__, f.__code__) for f in (flat, unflat.func)):
            return  # (tried and not proven; or proven and still bound as then)
    if len(_TRIED) > 4096:
        _TRIED.clear()
    _TRIED[(id(t), id(flat))] = (t, flat, False)  # (kept alive: their ids stay theirs)
    if (
        type(flat) is not _FUNCTION
        or not str(flat.__code__.co_filename).startswith("<generated_flatten_")
        or type(unflat) is not functools.partial
        or type(unflat.func) is not _FUNCTION
        or len(unflat.args) != 1
        or unflat.args[0] is not t
        or unflat.keywords
    ):
        return
    gen = _generator()
    if gen is None:
        return
    # The class as it was when equinox generated them: its qualified name then, from
    # the file name (a class renamed since, as equinox's ``str2jax`` does, generates
    # other text); what the code does is compared whole, so a stand-in that carries
    # that name proves the same code or none.
    qual = flat.__code__.co_filename[len("<generated_flatten_") : -1]
    module = names(t)[2]
    stand_in = type(
        "_", (), {"__qualname__": qual, "__module__": module if type(module) is str else "?"}
    )
    try:
        fields = dataclasses.fields(t)
        again = gen(stand_in, fields)
        flat2, unflat2 = again[0], again[2]
    except Exception:  # (not a class the generator takes: not proven)
        return
    pairs = ((flat, flat2, "flatten"), (unflat.func, unflat2, "unflatten"))
    _TRIED[(id(t), id(flat))] = (t, flat, all([_prove(f, f2, n) for f, f2, n in pairs]))


def _generator() -> Any:
    """Equinox's generator, where it is loaded and proven library code."""
    m = sys.modules.get(_EQX)
    d = module_dict(m)
    if d is None or not is_library_module(m):
        return None
    gen = d.get("generate_flatten_functions")
    if type(gen) is not _FUNCTION or not is_library_code(gen.__globals__, gen.__code__):
        return None
    return gen


def _prove(f: Any, f2: Any, name: str) -> bool:
    c, c2 = f.__code__, getattr(f2, "__code__", None)
    if type(f2) is not _FUNCTION or type(c2) is not types.CodeType:
        return False
    if c != c2 or (c.co_filename, c.co_qualname) != (c2.co_filename, c2.co_qualname):
        return False  # (code equality: bytecode, constants, names, flags, layout, tables)
    if any(type(k) is types.CodeType for k in c.co_consts):
        return False  # (nested code: what the generator makes has none)
    if f.__closure__ or f.__defaults__ or f.__kwdefaults__:
        return False
    g, g2 = f.__globals__, f2.__globals__
    if type(g) is not dict or g.get(name) is not f or g2.get(name) is not f2:
        return False
    bound = []
    for n in ("__builtins__", *c.co_names):
        if n == name:
            continue
        if (n in g) != (n in g2) or g.get(n) is not g2.get(n):
            return False
        bound.append((n, g.get(n, UNBOUND)))
    proven_code(f, tuple(bound), _EQX)
    return True


__all__ = ["prove_node", "prove_nodes"]
