"""Entry signing: the cache directory's secret, and the HMACs over what pcache stores.

No JAX here (``pcache verify`` uses it). Whoever can write the cache directory can
write any row and any byte of the store; only a holder of ``secret.key`` (mode 0600)
can sign. An entry's ``extra`` carries:

``format``     `ENTRY_FORMAT`: what the fields below mean.
``replay``     what lowering did besides producing the module (``_replay.Replay``).
``load``       optional load parameters (the preloader loads with them).
``head_hmac``  over the key, ``format``, the raw size and ``load``: everything that
               decides whether and how an entry is read, checked from the metadata
               alone, before a value byte is read or inflated (so a row cannot make
               pcache inflate more than what was signed).
``hmac``       over the key, ``format``, ``replay`` and the raw bytes.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import secrets
import stat
from pathlib import Path
from typing import Any

import filelock

from pcache._errors import IntegrityError, PcacheError, StaleEntryError

# 3: ``head_hmac`` (signed raw size and load parameters) replaces ``load_hmac``.
ENTRY_FORMAT = 3
SIGNED_EXTRA = ("format", "replay")
SECRET_BYTES = 32
MIN_SECRET_BYTES = 16  # pcache never signs with less: a shorter file was never used


def _canonical(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


class Signer:
    """Signs and checks entries with one directory's secret."""

    def __init__(self, secret: bytes, secret_path: Path) -> None:
        self._secret = secret
        self.secret_path = secret_path

    def sign(self, key: str, value: bytes, meta: dict[str, Any] | None = None) -> str:
        """HMAC of ``key``, the signed part of the metadata, and the bytes."""
        h = hmac.new(self._secret, key.encode() + b"\0", hashlib.sha256)
        if meta:
            h.update(_canonical(meta) + b"\0")
        h.update(value)  # no concatenated copy of a large executable
        return h.hexdigest()

    def head(self, key: str, raw_size: int, load: Any) -> str:
        """HMAC of what decides whether and how an entry is read, in its own domain
        (no entry key starts with this prefix)."""
        text = _canonical({"format": ENTRY_FORMAT, "raw_size": raw_size, "load": load})
        return self.sign("pcache-entry-head\0" + key, text)

    def seal(self, key: str, raw: bytes, extra: dict[str, Any]) -> dict[str, Any]:
        """``extra`` with ``format`` and both HMACs added, ready to store."""
        extra = {**extra, "format": ENTRY_FORMAT}
        extra["hmac"] = self.sign(key, raw, {k: extra.get(k) for k in SIGNED_EXTRA})
        extra["head_hmac"] = self.head(key, len(raw), extra.get("load"))
        return extra

    def admit(self, key: str, raw_size: int, extra: dict[str, Any]) -> None:
        """Raise unless the entry's metadata is pcache's own for this key: a
        `StaleEntryError` for another entry format, an `IntegrityError` for a head
        that fails its HMAC (forged, or edited: e.g. a raw size that was never
        signed)."""
        if extra.get("format") != ENTRY_FORMAT:
            raise StaleEntryError(f"entry {key[:12]} has entry format {extra.get('format')!r}")
        tag = extra.get("head_hmac")
        if not (
            isinstance(tag, str)
            and hmac.compare_digest(self.head(key, raw_size, extra.get("load")), tag)
        ):
            raise IntegrityError(
                f"entry {key[:12]} failed its HMAC check (its metadata was not written "
                f"with this cache's secret {self.secret_path}); ignoring and removing it"
            )

    def check(self, key: str, raw: bytes, extra: dict[str, Any]) -> None:
        """Raise `IntegrityError` unless the bytes and the signed metadata are ours."""
        tag = extra.get("hmac")
        meta = {k: extra.get(k) for k in SIGNED_EXTRA}
        if not (isinstance(tag, str) and hmac.compare_digest(self.sign(key, raw, meta), tag)):
            raise IntegrityError(
                f"entry {key[:12]} failed its HMAC check (written without this cache's "
                f"secret {self.secret_path}); ignoring and removing it"
            )


# ----------------------------------------------------------------------- key files

MIN_KEY_BYTES = 16


def read_key_file(path: str | os.PathLike) -> bytes:
    """A key file given by the user (a bundle's signing key, the fleet key): at
    least `MIN_KEY_BYTES` bytes (surrounding whitespace ignored), readable by its
    owner only; `PcacheError` naming what is wrong."""
    p = Path(path)
    try:
        st = p.stat()
        data = p.read_bytes()
    except OSError as exc:
        raise PcacheError(f"key file {p}: {exc.strerror or exc}") from exc
    if st.st_mode & 0o077:
        raise PcacheError(
            f"key file {p} is readable by others (mode {st.st_mode & 0o777:o}); chmod 600 it first"
        )
    if len(data.strip()) < MIN_KEY_BYTES:
        raise PcacheError(f"key file {p} is shorter than {MIN_KEY_BYTES} bytes")
    return data.strip()


# ----------------------------------------------------------------------- the secret


def load_secret(path: Path, *, create: bool = True) -> bytes:
    """The per-directory HMAC secret (mode 0600, owned by us), created if missing.

    Entries are signed with it, so someone who can write the cache directory but
    cannot read this file cannot plant an executable that pcache would load. A
    secret file that another user owns or that others can read is refused.

    Created atomically (a complete, fsynced temporary file linked into place, so a
    full disk can never leave an empty one, and two processes starting together
    agree on one secret). A file shorter than `MIN_SECRET_BYTES` was never used to
    sign anything (pcache refuses to), so it is replaced, under a lock.
    """
    try:
        data = _read(path)
    except FileNotFoundError:
        if not create:
            raise
        _create(path)
        data = _read(path)
    if len(data) >= MIN_SECRET_BYTES:
        return data
    if not create:
        raise PcacheError(f"{path} is truncated ({len(data)} bytes)")
    with filelock.FileLock(f"{path}.lock", is_singleton=False):
        data = _read(path)
        if len(data) < MIN_SECRET_BYTES:  # nobody repaired it while we waited
            tmp = _write_new(path)
            os.replace(tmp, path)
            _fsync_dir(path.parent)
            data = _read(path)
    return data


def _read(path: Path) -> bytes:
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise PcacheError(f"{path} is not a regular file")
        if st.st_uid != os.geteuid():
            raise PcacheError(f"{path} is owned by uid {st.st_uid}, not by this user")
        if st.st_mode & 0o077:
            raise PcacheError(
                f"{path} is readable or writable by others (mode {st.st_mode & 0o777:o})"
            )
        return f.read(4096)


def _write_new(path: Path) -> Path:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(secrets.token_bytes(SECRET_BYTES))
            f.flush()
            os.fsync(f.fileno())
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return tmp


def _create(path: Path) -> None:
    tmp = _write_new(path)
    try:
        os.link(tmp, path)  # never replaces: the first of several creators wins
    except FileExistsError:
        pass
    except OSError:  # a filesystem without hard links: exclusive create instead
        with contextlib.suppress(FileExistsError):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(Path(tmp).read_bytes())
                f.flush()
                os.fsync(f.fileno())
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
    _fsync_dir(path.parent)


def _fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
