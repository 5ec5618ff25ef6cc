"""Side files: values too large to keep inline in SQLite.

Layout: ``<directory>/values/<t[:2]>/<t>.val`` where ``t`` is 32 random hex
digits chosen per put (never derived from the key: an overwrite writes a new
file, so a crash mid-overwrite can never pair a row with the wrong bytes).
A file holds exactly the stored (codec-encoded) bytes.

Write protocol (crash-safe): write ``<t>.val.tmp``, fsync, rename to
``<t>.val``, and only then commit the row that names it.  Deleting commits the
row deletion first and unlinks after.  A crash between the two steps leaves an
orphan file no row names; gc (and verify with ``fix=True``) sweeps orphans
older than a grace period, long enough that a writer still waiting to commit
is never robbed of its file.
"""

from __future__ import annotations

import os
import re
import secrets
from pathlib import Path

__all__ = ["SideFiles", "SizeMismatch"]

_NAME = re.compile(r"^[0-9a-f]{2}/[0-9a-f]{32}\.val(\.tmp)?$")


class SizeMismatch(ValueError):
    """A side file's size is not the one its row records (it was not read)."""


class SideFiles:
    @staticmethod
    def valid_name(name: str) -> bool:
        return bool(_NAME.match(name)) and not name.endswith(".tmp")

    def __init__(self, root: Path, *, fsync: bool = True) -> None:
        self.root = root
        self.fsync = fsync

    def path(self, name: str) -> Path:
        # Names come from the database; refuse anything that is not ours so a
        # crafted or corrupt row can never make us read or unlink outside root.
        if not _NAME.match(name):
            raise ValueError(f"not a side-file name: {name!r}")
        return self.root / name

    def write(self, data: bytes) -> str:
        """Durably write ``data`` to a new side file; return its name."""
        token = secrets.token_hex(16)
        name = f"{token[:2]}/{token}.val"
        final = self.root / name
        tmp = final.with_name(final.name + ".tmp")
        final.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            try:
                view = memoryview(data)
                while view:
                    n = os.write(fd, view)
                    view = view[n:]
                if self.fsync:
                    os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, final)
        except BaseException:
            _unlink_quietly(tmp)
            raise
        return name

    def read(self, name: str, size: int) -> bytes:
        """The file's bytes, if it holds exactly ``size`` (checked before reading, so a
        planted or grown file costs no memory); else SizeMismatch."""
        with open(self.path(name), "rb") as f:
            actual = os.fstat(f.fileno()).st_size
            if actual != size:
                raise SizeMismatch(f"side file of {actual} bytes, recorded {size}")
            data = f.read(size + 1)
        if len(data) != size:  # changed while we read it
            raise SizeMismatch(f"side file of {len(data)} bytes, recorded {size}")
        return data

    def unlink(self, name: str) -> None:
        _unlink_quietly(self.path(name))

    def listing(self) -> dict[str, tuple[float, int]]:
        """Every side file and temp file: ``name -> (mtime, size)``."""
        out: dict[str, tuple[float, int]] = {}
        try:
            subdirs = list(os.scandir(self.root))
        except FileNotFoundError:
            return out
        for sub in subdirs:
            if not sub.is_dir(follow_symlinks=False) or len(sub.name) != 2:
                continue
            try:
                files = list(os.scandir(sub.path))
            except FileNotFoundError:  # removed by a concurrent sweep
                continue
            for f in files:
                name = f"{sub.name}/{f.name}"
                if not _NAME.match(name):
                    continue
                try:
                    st = f.stat(follow_symlinks=False)
                except FileNotFoundError:  # unlinked between scandir and stat
                    continue
                out[name] = (st.st_mtime, st.st_size)
        return out


def _unlink_quietly(path: Path) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:  # already gone: a concurrent gc/delete got there first
        pass
