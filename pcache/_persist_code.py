"""Code objects by content, for the persisted key: bytecode, constants (nested code
by its digest; a frozenset of strings sorted where the hash seed is random), names,
argument layout and flags; not the file or lines (moved code still hits). And the
hash seed the interpreter runs with.

JAX-free.
"""

from __future__ import annotations

import enum
import os
import sys
import types
from typing import Any

import numpy as np

from pcache import _memos
from pcache._introspect import class_attr, inst_dict, is_a
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


def seeded(x: Any) -> bool:
    """Whether ``x``'s hash is one the process's hash seed draws: a non-empty string's
    or bytes' under a random seed, an enum member's (``hash(self._name_)``), a tuple's or a
    frozenset's holding one (its hash combines theirs). Not ``None``'s: its address's
    low bits, which place it in a set, are alike in every process (review 196)."""
    if HASH_SEED != "random":
        return False
    t = type(x)
    if t is str or t is bytes:  # (an empty one hashes to 0 under every seed: 197)
        return len(x) > 0
    if t is tuple or t is frozenset:
        return any(map(seeded, x))
    if is_a(x, enum.Enum) and class_attr(t, "__hash__") is _ENUM_HASH:
        name = (inst_dict(x) or {}).get("_name_")
        return type(name) is not str or seeded(name)
    return False


_ENUM_HASH = enum.Enum.__dict__["__hash__"]


def unordered(xs: list, got: list) -> tuple:
    """A set's items (``xs``, described ``got``, in the order it iterates them) sorted,
    and that order (code reads it: ``next(iter(S))``, ``for i in {0, 8, 16}``: reviews
    38, 195) for every item whose hash is not a draw of the hash seed (`seeded`):
    those land where the draw puts them (a program whose trace depends on where must
    pin ``PYTHONHASHSEED``: README; review 60: else any ``m in {"train", "eval"}`` made
    every process miss); the others where their hashes (numbers, tuples of them,
    numpy scalars, ``None``: review 196) and the order they were added in put them,
    in every process."""
    order = sorted(range(len(got)), key=lambda i: repr(got[i]))
    rank = {i: r for r, i in enumerate(order)}
    kept = tuple(rank[i] for i in range(len(xs)) if not seeded(xs[i]))
    return (*(got[i] for i in order), ("order", kept))


def _const(x: Any) -> Any:
    t = type(x)
    if t is types.CodeType:
        return ("c", code_digest(x))
    if t is tuple:
        return ("t", *map(_const, x))
    if t is frozenset:
        xs = list(x)
        return ("fs", *unordered(xs, [_const(k) for k in xs]))
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
