"""How `pcache._walk.Walker` keys numpy's arrays, scalars and dtypes."""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

import numpy as np

from pcache._usercode import NoReuse, qualname

if TYPE_CHECKING:
    from pcache._walk import Walker

#: Captured numpy arrays larger than this are not hashed on every call: no reuse.
NUMPY_MAX_BYTES = 256 * 1024


def numpy_array(w: Walker, a: np.ndarray) -> tuple:
    back = w._enter(a)
    if back is not None:
        return back
    if a.dtype.hasobject:
        raise NoReuse("numpy-object")
    if a.nbytes > NUMPY_MAX_BYTES:
        raise NoReuse("numpy-too-large")
    data = a.tobytes()  # C order (a memoryview refuses ml_dtypes' formats)
    digest = hashlib.blake2b(data, digest_size=16).digest()
    f = a.flags
    layout = (a.strides, f.writeable, f.c_contiguous, f.f_contiguous, f.aligned, f.owndata)
    node = ("n", w.dtype(a.dtype), a.shape, digest, layout)
    base = a.base
    if base is None:
        return node
    # a view: what it shares memory with, and where in it (``a.base[7]``,
    # ``np.shares_memory(a, BUF)``)
    try:  # (a ``bytes`` or other buffer too: ``np.frombuffer(B, offset=8)``, review 74)
        buf = base if isinstance(base, np.ndarray) else np.frombuffer(base, np.uint8)
    except (TypeError, ValueError, BufferError):
        raise NoReuse(f"numpy-base:{qualname(type(base))}") from None
    offset = a.__array_interface__["data"][0] - buf.__array_interface__["data"][0]
    return (*node, "base", w.value(base), offset)


def numpy_scalar(w: Walker, v: np.generic) -> tuple:
    if v.dtype.hasobject:
        raise NoReuse("numpy-object")
    back = w._enter(v)
    if back is not None:
        return back
    node = ("g", w.dtype(v.dtype), v.tobytes())
    return (*node, w.ident(v)) if bool(v != v) else node  # a NaN: its identity


def dtype(w: Walker, dt: np.dtype) -> tuple:
    """Every property of a dtype that decides what its bytes mean."""
    if dt.hasobject:
        raise NoReuse("numpy-object")
    return (
        "dt",
        w.ident(dt.type),
        dt.str,
        repr(dt.descr),
        dt.name,
        dt.byteorder,
        dt.isalignedstruct,
        dt.itemsize,
        repr(dt),
        w.value(dict(dt.metadata)) if dt.metadata else None,
    )


__all__ = ["NUMPY_MAX_BYTES", "dtype", "numpy_array", "numpy_scalar"]
