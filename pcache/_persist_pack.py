"""The persisted trace key's serialization (`pcache._persist_key`): an injective,
tagged, length-prefixed encoding of ``str``, ``bytes``, ``int``, ``bool``, ``None``
and tuples of them, hashed once (one hash update per piece cost more than the walk
that made the parts). Anything else refuses the key (`NoReuse`): the walks make
only these types, this is the check."""

from __future__ import annotations

import hashlib
from typing import Any

from pcache import _memos
from pcache._usercode import NoReuse, qualname

# A long tuple packed before, by identity (tuples of str, bytes, int, bool, None and
# such tuples are immutable all the way down: the same object packs the same)
_PACK_MEMO_LEN = 8
_PACKED: dict = _memos.memo("persist.packed", {})


def pack(obj: Any, out: list) -> None:
    """Append to ``out`` an injective encoding of ``obj`` (tagged, length-prefixed);
    hashed once, joined (one hash update per piece cost more than the walk)."""
    t = type(obj)
    if t is tuple:
        if len(obj) >= _PACK_MEMO_LEN:  # (the host state's filters and options: the
            got = _PACKED.get(id(obj))  # same tuple object while they are unchanged)
            if got is None or got[0] is not obj:
                sub: list = []
                _pack_tuple(obj, sub)
                if len(_PACKED) > 256:
                    _PACKED.clear()
                got = _PACKED[id(obj)] = (obj, b"".join(sub))  # (held: the id stays its)
            out.append(got[1])
            return
        _pack_tuple(obj, out)
    elif t is str:
        b = obj.encode("utf-8", "surrogatepass")
        out.append(b"s%d:" % len(b))
        out.append(b)
    elif t is bytes:
        out.append(b"y%d:" % len(obj))
        out.append(obj)
    elif t is bool:
        out.append(b"T" if obj else b"F")
    elif t is int:
        out.append(b"i%d;" % obj)
    elif obj is None:
        out.append(b"N")
    else:
        raise NoReuse(f"persist-unencodable:{qualname(t)}")


def _pack_tuple(obj: tuple, out: list) -> None:
    out.append(b"(%d:" % len(obj))
    for x in obj:
        pack(x, out)
    out.append(b")")


def packed(domain: bytes, obj: Any) -> str:
    """The sha256 hex digest of ``domain`` and `pack` of ``obj``."""
    out = [domain]
    pack(obj, out)
    return hashlib.sha256(b"".join(out)).hexdigest()


__all__ = ["pack", "packed"]
