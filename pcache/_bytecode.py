"""A code object's instructions, read fast from its raw code (standard library only:
`tests/test_provenance_ops.py` loads this file alone under each interpreter it finds)."""

from __future__ import annotations

import dis
import sys
import types

_EXTENDED_ARG = dis.opmap["EXTENDED_ARG"]


def ops(c: types.CodeType) -> list:
    """``c``'s own instructions as ``dis.get_instructions`` names them, as (opname,
    arg, argval), read from the raw code: ``dis`` builds an object per instruction
    with its positions and labels, over three times the time, and these reads are
    most of a warm process's first keys. Equal to ``dis``'s on every code object of
    the files a process loads (`tests/test_provenance_ops.py`, each interpreter)."""
    code, names, consts, out, ext = c.co_code, c.co_names, c.co_consts, [], 0
    for i in range(0, len(code), 2):
        op, arg = code[i], code[i + 1] | ext
        ext = arg << 8 if op == _EXTENDED_ARG else 0
        if op == _CACHE:  # (an inline cache entry, 3.11 on: not an instruction)
            continue
        if op in _HASNAME:
            val = names[arg >> _NAME_SHIFT.get(op, 0)]
        elif op in _HASCONST:
            val = consts[arg]
        else:
            val = arg
        out.append((_OPNAME[op], arg, val))
    return out


def named_by(c: types.CodeType, opcodes: frozenset) -> set:
    """The names ``c``'s own operations ``opcodes`` (each taking a name: a store, a
    delete) have as their argument, read from the raw code: each found by its byte
    among the operation bytes, its index completed by the ``EXTENDED_ARG`` prefixes
    before it (no name flags: not for ``LOAD_GLOBAL`` or, from 3.12, ``LOAD_ATTR``)."""
    code, names, out = c.co_code, c.co_names, set()
    opb = code[::2]
    for op in opcodes:
        j = opb.find(op)
        while j >= 0:
            arg, k, shift = code[2 * j + 1], j - 1, 8
            while k >= 0 and opb[k] == _EXTENDED_ARG:
                arg |= code[2 * k + 1] << shift
                k, shift = k - 1, shift + 8
            out.add(names[arg])
            j = opb.find(op, j + 1)
    return out


_OPNAME = dis.opname
_CACHE = dis.opmap.get("CACHE", -1)
_HASNAME = frozenset(dis.hasname)
_HASCONST = frozenset(dis.hasconst)
#: Operations whose argument holds flags below the name's index (3.11 on: whether
#: ``LOAD_GLOBAL`` pushes a null; 3.12 on: whether ``LOAD_ATTR`` loads a method, and
#: ``LOAD_SUPER_ATTR``'s two flags).
_NAME_SHIFT = {
    dis.opmap[name]: shift
    for name, shift, since in (
        ("LOAD_GLOBAL", 1, (3, 11)),
        ("LOAD_ATTR", 1, (3, 12)),
        ("LOAD_SUPER_ATTR", 2, (3, 12)),
    )  # fmt: skip
    if sys.version_info >= since
}
