"""The local tiers: the store in the cache directory, and what the preload thread loaded.

No JAX here. Entries are signed with the directory's secret (`pcache._signing`): an
entry's signed head is checked before any value byte is read, its HMAC before it is
loaded, and one that fails either is counted, reported once and removed. A store
that cannot be written is used read-only (hits only, ``writes_skipped`` counted);
one that cannot be used at all is replaced by `NoStore` (the memory tier only), each
with one logged warning.
"""

from __future__ import annotations

import errno
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pcache import _config
from pcache._config import Settings
from pcache._errors import (
    CacheDirError,
    CheckError,
    CorruptEntryError,
    IntegrityError,
    PcacheError,
    StaleEntryError,
)
from pcache._memory import MemoryTier
from pcache._preload import Preloader, PreloadFn, PreloadHost, WorkingSets
from pcache._signing import Signer, load_secret
from pcache._tiers import Compiled, Hit, LoadFn, Request

if TYPE_CHECKING:
    from pcache._cache import Runtime
    from pcache._key import CacheKey

logger = logging.getLogger("pcache")

#: What an entry's metadata may give another tier (`pcache.store.META_KEYS`).
META_KEYS = ("backend", "device_kind", "jax_version", "jaxlib_version", "function_name")
META_KEYS += ("compile_seconds",)


def check_key_parts(rt: Runtime, key: CacheKey | None, extra: dict[str, Any]) -> None:
    """``JAX_PCACHE_CHECK``: an entry loaded for ``key`` was stored under the same
    key parts as this lookup computed (from scratch, in that mode)."""
    if key is None or not rt.settings.check:
        return
    stored = extra.get("key_parts")
    if stored is not None and [tuple(p) for p in stored] != list(key.parts):
        raise CheckError(
            f"entry {key.digest[:12]} was stored under key parts {stored}, this "
            f"lookup computed {list(key.parts)}"
        )


class Local:
    """The store (`pcache.store.Store`) and the directory's signer: the cache
    directory, made private (mode 0700) and its secret made or read, or
    `CacheDirError`."""

    name = "local"

    def __init__(self, rt: Runtime, settings: Settings) -> None:
        self.rt = rt
        path, layout = settings.path, settings.layout
        try:
            path.mkdir(mode=0o700, parents=True, exist_ok=True)
            _warn_if_untrusted(path)
            secret = load_secret(layout.secret, create=os.access(path, os.W_OK))
        except (OSError, PcacheError) as exc:
            raise CacheDirError(
                getattr(exc, "errno", None) or errno.EACCES, f"cache directory {path}: {exc}"
            ) from exc
        self.signer = Signer(secret, layout.secret)
        self.store = self._open(layout.store, settings.max_disk_bytes)
        self.read_only = self.store.read_only

    def _open(self, where: Path, max_bytes: int | None) -> Any:
        """The store, read-only where it cannot be written; where it cannot be used at
        all (a newer pcache's database, a directory we may not read), none: the
        memory tier still works, and the reason is logged once."""
        from pcache import store  # JAX-free; imported here so `import pcache` stays light

        try:
            st = store.Store(where, max_bytes=max_bytes, report=self.rt.store_report)
        except (store.StoreError, OSError) as exc:
            if self.rt.settings.raise_errors and not isinstance(exc, store.StoreVersionError):
                raise
            logger.warning(
                "pcache: the store in %s cannot be used (%s: %s); caching in memory only",
                where,
                type(exc).__name__,
                exc,
            )
            return NoStore(max_bytes, f"{type(exc).__name__}: {exc}")
        if st.read_only:
            logger.warning(
                "pcache: %s is read-only (%s): reading cached programs from it, "
                "storing none (counted as writes_skipped)",
                where,
                st.read_only_reason,
            )
        return st

    # -- the tier -------------------------------------------------------------

    def lookup(self, req: Request) -> Hit | None:
        if not req.persistent:
            return None
        t0 = time.perf_counter()
        got = self.read(req.digest, req.load)
        if got is None:
            if req.jit:  # memory, preloaded and local: the remote is asked next
                self.rt.count("local_misses")
            return None
        exe, raw, entry = got
        if req.jit:  # the HLO seam counts its own (hlo_hits)
            check_key_parts(self.rt, req.key, entry.extra)
            load_s = time.perf_counter() - t0
            saved = max(0.0, (entry.compile_seconds or 0.0) - load_s)
            self.rt.count("disk_hits", seconds_saved=saved, load_time_sec=load_s)
        return Hit(exe, len(raw))

    def put(self, req: Request, found: Hit | Compiled) -> bool:
        """A compile is written now (the next process may want it at once); a copy of
        a remote hit when the remote tier says (``found.defer``: its writer thread)."""
        if isinstance(found, Compiled):
            if not req.persistent or found.serialized is None:
                return False
            return self.write(req.digest, found.serialized, req.meta)
        if found.raw is None or found.meta is None:
            return False
        raw, meta = found.raw, found.meta
        (found.defer or (lambda job: job()))(lambda: self.write(req.digest, raw, meta))
        return True

    def stats(self) -> dict[str, Any]:
        return {"read_only": self.read_only, "reason": getattr(self.store, "read_only_reason", "")}

    def has(self, digest: str) -> bool:
        try:
            return digest in self.store
        except Exception as exc:
            self.rt.error("store read", exc)
            return False

    # -- signed entries -------------------------------------------------------

    def entry_ok(self, key: str, value: bytes, extra: dict[str, Any]) -> bool:
        """Whether ``value`` and the signed part of ``extra`` were written by a holder
        of this cache's secret."""
        try:
            self.signer.check(key, value, extra)
        except IntegrityError:
            return False
        return True

    def load_params(self, key: str, entry: Any) -> Any | None:
        """An entry's load parameters, if its signed head is pcache's own; else None
        (the preloader reads nothing more of it)."""
        try:
            self.signer.admit(key, entry.raw_size, entry.extra)
        except PcacheError:
            return None
        return entry.extra.get("load")

    def read(self, digest: str, load: LoadFn):
        """Read an entry, check its signed head before any value byte is read, then
        its HMAC, and ``load`` it (with its signed replay record).

        Returns ``(loaded, raw, entry)``, or None on a miss or any failure (a bad
        entry is counted, logged once per cause, and removed).
        """
        rt = self.rt
        try:
            # The HMAC below covers every byte: the store's own checksum would hash
            # them a second time (~5 ms per 10 MB).
            got = self.store.get_entry(digest, verify=False, admit=self._admit(digest))
        except StaleEntryError as exc:  # another pcache's format: overwritten on compile
            logger.debug("pcache: %s", exc)
            return None
        except IntegrityError as exc:
            rt.error("load entry", exc)
            self.drop(digest)
            return None
        except Exception as exc:
            rt.error("store read", exc)
            return None
        if got is None:
            return None
        raw, entry = got
        try:
            if not self._check(digest, raw, entry):
                return None
            loaded = load(raw, entry.extra.get("replay"))
        except Exception as exc:
            rt.error("load entry", exc)
            self.drop(digest)
            return None
        rt.count("bytes_read", len(raw))
        return loaded, raw, entry

    def _admit(self, digest: str) -> Callable[[Any], None]:
        return lambda entry: self.signer.admit(digest, entry.raw_size, entry.extra)

    def _check(self, digest: str, raw: bytes, entry: Any) -> bool:
        """The HMAC; damaged bytes fail it too: say which it is (False: removed)."""
        try:
            self.signer.check(digest, raw, entry.extra)
        except IntegrityError:
            from pcache.store import StoreCorruptionWarning, checksum_matches

            if checksum_matches(raw, entry.checksum):
                raise
            self.rt.store_report(
                f"pcache: entry {digest[:12]} does not match its checksum (damaged "
                "on disk); removed, compiling normally",
                StoreCorruptionWarning,
                "checksum",
            )
            if self.rt.settings.raise_errors:
                raise CorruptEntryError(
                    f"entry {digest[:12]} does not match its checksum"
                ) from None
            self.drop(digest)
            return False
        return True

    def read_for_upload(self, digest: str) -> tuple[bytes, dict[str, Any]] | None:
        """The local entry ``digest`` and its metadata, if this directory signed it
        (not a hit of this program's: counted nowhere)."""
        try:
            got = self.store.get_entry(digest, verify=False, admit=self._admit(digest), touch=False)
        except PcacheError:
            return None  # another format, or not this directory's: never uploaded
        if got is None:
            return None
        raw, entry = got
        if not self.entry_ok(digest, raw, entry.extra):
            return None
        meta: dict[str, Any] = {k: getattr(entry, k, None) for k in META_KEYS}
        meta = {k: v for k, v in meta.items() if v not in (None, "")}
        return raw, {**meta, "extra": dict(entry.extra)}

    def write(self, digest: str, raw: bytes, meta: dict[str, Any]) -> bool:
        """Store ``raw`` under ``digest``, ``meta["extra"]`` signed; False if not stored."""
        if self.read_only:
            self.rt.count("writes_skipped")
            return False
        meta = dict(meta)
        sealed = self.signer.seal(digest, raw, dict(meta.pop("extra", {})))
        try:
            self.store.put(digest, raw, meta={**meta, "extra": sealed})
        except Exception as exc:
            self.rt.error("store write", exc)
            return False
        self.rt.count("bytes_written", len(raw))
        return True

    def drop(self, digest: str) -> None:
        if self.read_only:
            return
        try:
            self.store.delete(digest)
        except Exception as exc:
            self.rt.error("store delete", exc)


class Preloaded:
    """What a preload thread loaded from the store (`pcache._preload`): this
    program's working set from its previous run, loaded while it traces."""

    name = "preloaded"

    def __init__(self, rt: Runtime, local: Local, limit: int, memory_bytes: int) -> None:
        self.rt, self.local, self.limit, self.memory_bytes = rt, local, limit, memory_bytes
        self.host = PreloadHost(
            store=local.store,
            load_params=local.load_params,
            body_ok=local.entry_ok,
            entry_overhead=MemoryTier.ENTRY_OVERHEAD,
            on_preloaded=lambda: rt.count("preloaded"),
            background_error=rt.background_error,
        )
        self.working_sets = WorkingSets(self.host, enabled=limit > 0 and not local.read_only)
        self.preloaders: dict[str, Preloader] = {}  # working-set name -> its preloader
        self._started: set[str] = set()
        self._lock = threading.Lock()
        self.forked = False

    def after_fork(self) -> None:
        # The preload threads and the save timer do not exist in the child. A child
        # neither preloads nor saves working sets: it would start the parent's
        # previous run over again and overwrite the program's set with its few keys.
        self.forked = True
        self.preloaders = {}
        self._lock = threading.Lock()
        self.working_sets = WorkingSets(self.host, enabled=False)

    def pending(self, name: str) -> bool:
        return self.limit > 0 and not self.forked and name not in self._started

    def start(self, name: str, current: str, usable: Callable[[Any], bool], load: PreloadFn):
        """See `pcache._cache.Runtime.start_preload`."""
        with self._lock:
            if not self.pending(name):
                return
            self._started.add(name)
            try:
                previous = self.local.store.key_set(name)
            except Exception as exc:
                self.rt.background_error("store read (working set)", exc)
                return
            self.working_sets.set_previous(name, previous)
            digests = [d for d in previous if d != current][: self.limit]
            if self.limit <= 0 or not digests:
                return
            pre = Preloader(self.host, digests, usable, load, self.memory_bytes // 2)
            self.preloaders[name] = pre
        pre.start()

    def lookup(self, req: Request) -> Hit | None:
        if not req.jit:
            return None
        got = None
        for pre in list(self.preloaders.values()):
            got = pre.take(req.digest)
            if got is not None:
                break
        if got is None:
            return None
        exe, signature, entry, nbytes = got
        rt = self.rt
        check_key_parts(rt, req.key, entry.extra)
        if req.accept is not None and not req.accept(signature):
            # Loaded with other compile options or devices than this lookup predicts
            # (the digest covers them, so only a stale or foreign entry gets here).
            rt.bypass("preload-mismatch", req.digest[:12])
            return None
        saved = entry.compile_seconds or 0.0
        rt.count("disk_hits", preload_hits=1, bytes_read=nbytes, seconds_saved=saved)
        try:
            self.local.store.touch(req.digest)
        except Exception as exc:
            rt.error("store counters", exc)
        return Hit(exe, nbytes)

    def put(self, req: Request, found: Hit | Compiled) -> bool:
        return False  # only its thread fills it

    def stats(self) -> dict[str, Any]:
        return {"working_sets": len(self.preloaders)}

    def release(self) -> None:
        """Drop preloaded executables nobody has asked for."""
        for pre in list(self.preloaders.values()):
            pre.release()

    def stop(self, join_timeout: float | None) -> None:
        preloaders = list(self.preloaders.values())
        for pre in preloaders:
            pre.stop(wait=False)
        for pre in preloaders:
            pre.stop(timeout=join_timeout)
        self.working_sets.save()


class NoStore:
    """Stands in for a store that cannot be used at all: every read misses, nothing
    is written (the memory tier still works)."""

    read_only = True

    def __init__(self, max_bytes: int | None, reason: str) -> None:
        self.max_bytes = max_bytes
        self.read_only_reason = reason

    def get_entry(self, key: str, **kw: Any) -> None:
        return None

    def entry(self, key: str) -> None:
        return None

    def entries(self, **kw: Any) -> Iterator[Any]:
        return iter(())

    def __contains__(self, key: object) -> bool:
        return False

    def key_set(self, name: str) -> list[str]:
        return []

    def touch(self, key: str) -> None:
        pass

    def bump(self, counters: dict[str, float]) -> None:
        pass

    def release_connection(self) -> None:
        pass

    def close(self) -> None:
        pass


_UNTRUSTED_WARNED: set[Path] = set()


def _warn_if_untrusted(path: Path) -> None:
    """Log once per directory when others may write it. A cache directory is
    trusted: its secret keeps planted executables out, but whoever may write it can
    delete, fill or lock it (JAX's and ccache's documentation say the same)."""
    if path in _UNTRUSTED_WARNED:
        return
    why = _config.untrusted_reasons(path)
    if why:
        _UNTRUSTED_WARNED.add(path)
        logger.warning(
            "pcache: cache directory %s is %s: whoever may write it can delete or fill the "
            "cache (not plant programs: entries are signed). Use a directory only you "
            "can write.",
            path,
            " and ".join(why),
        )
