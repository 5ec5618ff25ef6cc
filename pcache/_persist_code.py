"""Code objects by content, for the persisted key: bytecode, constants (nested code
by its digest; a frozenset of strings sorted where the hash seed is random), names,
argument layout and flags; not the file or lines (moved code still hits). And the
hash seed the interpreter runs with.

JAX-free.
"""

from __future__ import annotations

import os
import sys
import types
from typing import Any

import numpy as np

from pcache import _memos
from pcache._persist_pack import packed as _packed
from pcache._usercode import NoReuse

_CODE: dict = _memos.memo("persist.code", {})  # id(code) -> (code, its digest)
_SOURCES: dict = _memos.memo("persist.sources", {})  # file -> (stamp, digest)


def code_digest(code: types.CodeType) -> str:
    """A code object by content (not its file or lines), memoized per object."""
    e = _CODE.get(id(code))
    if e is not None and e[0] is code:
        return e[1]
    d = _packed(b"pcache-code\n", _code_parts(code))
    if len(_CODE) > 65536:
        _CODE.clear()
    _CODE[id(code)] = (code, d)
    return d


def _code_parts(c: types.CodeType) -> tuple:
    return (
        "code",
        c.co_code,
        tuple(_const(x) for x in c.co_consts),
        c.co_names,
        c.co_varnames,
        c.co_freevars,
        c.co_cellvars,
        c.co_argcount,
        c.co_posonlyargcount,
        c.co_kwonlyargcount,
        c.co_flags,
        c.co_stacksize,
        getattr(c, "co_exceptiontable", b""),
        c.co_name,
        getattr(c, "co_qualname", c.co_name),
    )


def _hash_seed() -> str:
    """The hash seed this interpreter runs with: ``PYTHONHASHSEED`` as the process
    started (a program may set the variable later, for its children), "random"
    where unset, ``random`` or ignored (``-E``)."""
    if sys.flags.ignore_environment:
        return "random"
    seed = os.environ.get("PYTHONHASHSEED", "random")
    try:
        with open("/proc/self/environ", "rb") as fh:
            for kv in fh.read().split(b"\0"):  # (the first, as ``getenv`` takes it)
                if kv.startswith(b"PYTHONHASHSEED="):
                    seed = kv.partition(b"=")[2].decode("ascii", "replace")
                    break
            else:
                seed = "random"
    except OSError:
        pass
    try:  # as the interpreter parses it (``strtoul``: "+1", " 1"; review 64)
        return str(int(seed, 10)) if seed.strip() != "random" else "random"
    except ValueError:
        return "random"


HASH_SEED = _hash_seed()


def _seeded(x: Any) -> bool:
    """Whether ``x``'s hash depends on the process's hash seed."""
    t = type(x)
    # (``None`` hashes by its address in 3.11: review 64)
    return (
        t is str
        or t is bytes
        or x is None
        or ((t is tuple or t is frozenset) and any(map(_seeded, x)))
    )


def _const(x: Any) -> Any:
    t = type(x)
    if t is types.CodeType:
        return ("c", code_digest(x))
    if t is tuple:
        return ("t", *map(_const, x))
    if t is frozenset:
        if HASH_SEED != "random" or not any(map(_seeded, x)):
            # in iteration order (``for i in {0, 8, 16}``: review 38; strings too under a
            # pinned seed, where the order the literal lists them in decides: review 62)
            return ("fs", *map(_const, x))
        # sorted: strings iterate in an order each process's hash seed draws (a
        # program whose trace depends on it must pin ``PYTHONHASHSEED``: README;
        # review 60: else any ``m in {"train", "eval"}`` made every process miss)
        return ("fss", *sorted(map(_const, x), key=repr))
    if t is float:
        return ("f", float.hex(x) if x == x else np.float64(x).tobytes())
    if t is complex:
        return ("z", _const(x.real), _const(x.imag))
    if t in (str, bytes, int, bool) or x is None or x is ...:
        return (t.__name__, x if x is not ... else "...")
    raise NoReuse(f"persist-code-constant:{t.__name__}")


def source_digest(file: str, name: str) -> str:
    """User module ``name``'s source, compiled, by `code_digest` (not its bytecode
    cache: the program runs what its source says); memoized per file stamp."""
    if not file.endswith(".py"):
        raise NoReuse(f"persist-sourceless-module:{name}")
    try:
        st = os.stat(file)
        stamp = (st.st_mtime_ns, st.st_size)
        e = _SOURCES.get(file)
        if e is not None and e[0] == stamp:
            return e[1]
        with open(file, "rb") as fh:
            code = compile(fh.read(), file, "exec", dont_inherit=True)
    except (OSError, SyntaxError, ValueError):
        raise NoReuse(f"persist-unreadable-module:{name}") from None
    got = code_digest(code)
    _SOURCES[file] = (stamp, got)
    return got


__all__ = ["HASH_SEED", "code_digest", "source_digest"]
