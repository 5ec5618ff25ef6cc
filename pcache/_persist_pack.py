"""The persisted trace key's serialization (`pcache._persist_key`), hashed once.

The walks make tuples of ``str``, ``bytes``, ``int``, ``bool`` and ``None``. They are
serialized by `marshal` at version 2, in C (the pure-Python encoder this replaced
cost a fifth of a new process's key): a tagged, length-prefixed encoding, injective
over every type it accepts (``1``, ``True`` and ``1.0`` are three tags; a float is
its eight bytes; a string its UTF-8 with surrogates passed), with neither the
object references nor the interned-string tag of versions 3 and later, so equal
values give equal bytes whichever objects hold them. The other builtin types it
takes (floats, lists, dicts, sets, code objects: the walks make none) are encoded as
exactly, a set in its iteration order (two equal sets may differ: a miss, never a
false hit). Anything else, a subclass of one of these included (a named tuple, an
``IntEnum``), refuses the key (`NoReuse`).
"""

from __future__ import annotations

import hashlib
import marshal
from typing import Any

from pcache._usercode import NoReuse

_VERSION = 2  # (no references, no interned tag: the bytes are the values')


def packed(domain: bytes, obj: Any) -> str:
    """The sha256 hex digest of ``domain`` and the serialization of ``obj``."""
    try:
        data = marshal.dumps(obj, _VERSION)
    except ValueError:  # (an object marshal does not take, or nested past its bound)
        raise NoReuse("persist-unencodable") from None
    return hashlib.sha256(domain + data).hexdigest()


__all__ = ["packed"]
