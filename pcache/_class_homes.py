"""Where a class lives, for `_class_shape`: whether it is the standard library's or
JAX's own (described by name, its version keyed), what a module holds under a dotted
name; and what an ``lru_cache`` wrapper holds in C."""

from __future__ import annotations

import functools
import gc
import os
import sys
import sysconfig
import types
from importlib.machinery import EXTENSION_SUFFIXES
from typing import Any

from pcache._introspect import cdict, inst_dict, is_a, names, plain_module
from pcache._memos import memo
from pcache._usercode import NoReuse, module_dict


def fixed(cls: type, d: dict) -> bool:
    """Whether ``cls`` is the class the standard library's or JAX's own module ``d``
    holds under its name: what it is, the Python and JAX versions (keyed) say, and
    its attributes change as pcache patches JAX (``PjitFunction.clear_cache``, set
    anew at each ``jit``), which a shape read at the first key would not follow."""
    _, qual, mod = names(cls)
    file = d.get("__file__") if type(mod) is str else None
    if type(file) is not str and type(mod) is str:  # (a submodule an extension made,
        file = _extension_file(mod)  # ``jaxlib._jax.pytree``: the extension's file)
    if type(file) is not str:
        return False
    got = _FIXED.get((mod, file))
    if got is None:
        top = mod.partition(".")[0]
        real = os.path.realpath(file)
        if top in sys.stdlib_module_names and not real.startswith(_SITES):
            homes = _STDLIB_DIRS
        elif top in ("jax", "jaxlib") and plain_module(sys.modules.get(top)):
            homes = (
                os.path.join(os.path.dirname(os.path.realpath(sys.modules[top].__file__)), ""),
            )
        else:
            homes = ()
        got = _FIXED[(mod, file)] = bool(homes) and real.startswith(homes)
    return got and holds(d, qual) is cls


def _extension_file(mod: str) -> str | None:
    """The file of the compiled extension whose module ``mod`` is a submodule of."""
    while "." in mod:
        mod = mod.rpartition(".")[0]
        file = (module_dict(sys.modules.get(mod)) or {}).get("__file__")
        if type(file) is str:
            return file if file.endswith(tuple(EXTENSION_SUFFIXES)) else None
    return None


def holds(d: dict, qual: Any) -> Any:
    """What namespace ``d`` holds under dotted ``qual`` (classes inside classes)."""
    if type(qual) is not str:
        return None
    head, _, rest = qual.partition(".")
    got = d.get(head)
    for part in rest.split(".") if rest else ():
        got = cdict(got).get(part) if is_a(got, type) else None
    return got


_FIXED: dict = memo("persist.class_shape.fixed", {})  # (module, file) -> the stdlib's, JAX's?
_STDLIB_DIRS = tuple(
    os.path.join(os.path.realpath(sysconfig.get_paths()[k]), "") for k in ("stdlib", "platstdlib")
)
#: (installed distributions' directories, which a virtual environment's standard library
#: directory holds: a ``distutils`` shim installed there is no standard library's)
_SITES = tuple(
    os.path.join(os.path.realpath(sysconfig.get_paths()[k]), "") for k in ("purelib", "platlib")
)


def lru_parts(v: Any) -> tuple:
    """An ``lru_cache`` wrapper's function (as it holds it), size, and whether it keys
    ``2`` and ``2.0`` apart (``typed``: C state no attribute shows; read from the
    ``cache_parameters`` function ``functools.lru_cache`` gave it, which must be that
    and say its size: review 197); else NoReuse."""
    d = inst_dict(v) or {}
    wrapped, params = d.get("__wrapped__"), d.get("cache_parameters")
    if not any(x is wrapped and callable(x) and not is_a(x, type) for x in gc.get_referents(v)):
        raise NoReuse("persist-library-value:lru_cache")
    code = params.__code__ if type(params) is types.FunctionType else None
    cells = (
        dict(zip(code.co_freevars, (c.cell_contents for c in params.__closure__), strict=True))
        if any(code is c for c in _LRU_PARAMS)
        else {}
    )
    size, typed = cells.get("maxsize", ()), cells.get("typed")
    if type(typed) not in (bool, int) or size != _LRU.cache_info(v).maxsize or type(size) is bool:
        raise NoReuse("persist-library-value:lru_cache")
    return wrapped, size, bool(typed)


def _lambdas(code: types.CodeType) -> list:
    """The code of the ``cache_parameters`` functions ``lru_cache`` makes."""
    out = [code] if code.co_freevars == ("maxsize", "typed") else []
    for k in code.co_consts:
        if type(k) is types.CodeType:
            out += _lambdas(k)
    return out


_LRU = functools._lru_cache_wrapper
_LRU_PARAMS = tuple(_lambdas(functools.lru_cache.__code__))
