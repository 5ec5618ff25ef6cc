"""What `pcache remote stats|gc` see and remove: the remote's keys, by format,
namespace and host class. JAX-free; reads no entry it does not have to (a read
makes a key young again, and `gc --older-than` ages by idle time)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from typing import Any

from pcache._remote_wire import MAX_HEAD_BYTES, REMOTE_FORMAT, ROOT, prefix_root, split_entry
from pcache._signing import ENTRY_FORMAT

ORPHAN_AGE = (
    3600.0  # a chunk without its head is removed after this long (a write may be under way)
)


@dataclasses.dataclass
class _Key:
    raw: bytes  # the key's name as the server has it (any bytes)
    name: str  # decoded, undecodable bytes as surrogates (`_enc` gives them back)
    fmt: str  # "r1e3"
    namespace: str
    host: str
    kind: str  # e, c, l
    digest: str
    id: str = ""


def _enc(name: str) -> bytes:
    return name.encode("utf-8", "surrogateescape")


def _parse(raw: bytes | str) -> _Key | None:
    if isinstance(raw, str):
        raw = _enc(raw)
    name = raw.decode("utf-8", "surrogateescape")
    parts = name.split(":", 5)
    if len(parts) != 6 or parts[0] != ROOT or parts[4] not in ("e", "c", "l"):
        return None
    k = _Key(raw, name, *parts[1:])
    if k.kind == "c":
        rest = k.digest.rsplit(":", 2)
        if len(rest) != 3:
            return None
        k.digest, k.id = rest[0], rest[1]
    return k


def _scan(client, match: str) -> Iterator[_Key]:
    for raw in client.scan_iter(match=match, count=1000):
        k = _parse(raw)
        if k is not None:
            yield k


def _lengths(client, names: list[bytes]) -> list[int]:
    """Bytes each key takes in the server (MEMORY USAGE: unlike a read, it leaves
    the key's idle time alone, which `gc --older-than` ages by)."""
    out: list[int] = []
    for i in range(0, len(names), 500):
        pipe = client.pipeline(transaction=False)
        for n in names[i : i + 500]:
            pipe.memory_usage(n, samples=0)
        out += [v if isinstance(v, int) else 0 for v in pipe.execute(raise_on_error=False)]
    return out


def inventory(client, namespace: str | None = None) -> dict[str, Any]:
    """What the remote holds under ``pcache:``, by format, namespace and host class:
    entries, chunks, leases and bytes; plus the server's memory settings."""
    groups: dict[tuple[str, str, str], dict[str, Any]] = {}
    keys = list(_scan(client, f"{ROOT}:*:{namespace}:*" if namespace else f"{ROOT}:*"))
    sizes = _lengths(client, [k.raw for k in keys])
    current = f"r{REMOTE_FORMAT}e{ENTRY_FORMAT}"
    for k, n in zip(keys, sizes, strict=True):
        g = groups.setdefault(
            (k.fmt, k.namespace, k.host),
            {
                "format": _printable(k.fmt),
                "current_format": k.fmt == current,
                "namespace": _printable(k.namespace),
                "host_class": _printable(k.host),
                "entries": 0,
                "chunks": 0,
                "leases": 0,
                "bytes": 0,
            },
        )
        g[{"e": "entries", "c": "chunks", "l": "leases"}[k.kind]] += 1
        g["bytes"] += n
    info = client.info("memory")
    evicted = client.info("stats").get("evicted_keys", 0)
    return {
        "groups": sorted(
            groups.values(), key=lambda g: (g["namespace"], g["format"], g["host_class"])
        ),
        "server": {
            "used_memory": info.get("used_memory", 0),
            "maxmemory": info.get("maxmemory", 0),
            "maxmemory_policy": info.get("maxmemory_policy", ""),
            "evicted_keys": evicted,
        },
    }


def _idle(client, names: list[bytes]) -> list[float | None]:
    """Seconds since each key was last read or written (None: unknown)."""
    out: list[float | None] = []
    for i in range(0, len(names), 500):
        pipe = client.pipeline(transaction=False)
        for n in names[i : i + 500]:
            pipe.object("idletime", n)
        got = pipe.execute(raise_on_error=False)
        out += [float(v) if isinstance(v, int) else None for v in got]
    return out


def gc(
    client,
    *,
    namespace: str | None = None,
    older_than: float | None = None,
    other_formats: bool = False,
    everything: bool = False,
    dry_run: bool = False,
) -> dict[str, Any]:
    """Remove entries (head and chunks) of ``namespace`` (every one if None) that
    nobody read for ``older_than`` seconds, or all of them (``everything``); every
    key of another format (``other_formats``); and chunks left without their head
    for over `ORPHAN_AGE`. Leases are never touched (they expire). Idle times are
    read before anything else, and nothing here reads an entry (which would make
    it young again). Where the server cannot tell idle times (an LFU policy), no
    entry is aged out: ``idle_unknown`` counts them. Returns counts."""
    current = f"r{REMOTE_FORMAT}e{ENTRY_FORMAT}"
    keys = [k for k in _scan(client, f"{ROOT}:*") if namespace in (None, k.namespace)]
    doomed: list[_Key] = []
    if other_formats:
        doomed += [k for k in keys if k.fmt != current and k.kind != "l"]
    mine = [k for k in keys if k.fmt == current]
    heads = [k for k in mine if k.kind == "e"]
    chunks = [k for k in mine if k.kind == "c"]
    head_idle = _idle(client, [h.raw for h in heads]) if older_than is not None else []
    chunk_idle = _idle(client, [c.raw for c in chunks])
    unknown = sum(1 for t in head_idle if t is None)
    if everything:
        old = heads
    elif older_than is not None:
        old = [
            h for h, t in zip(heads, head_idle, strict=True) if t is not None and t >= older_than
        ]
    else:
        old = []
    doomed += old

    def entry(k: _Key) -> tuple:
        return (k.fmt, k.namespace, k.host, k.digest)

    gone = {entry(h) for h in old}
    have_head = {entry(h) for h in heads} - gone
    ids: dict[tuple, set[str]] = {}
    head_ids: dict[tuple, str] = {}
    for c in chunks:
        ids.setdefault(entry(c), set()).add(c.id)
    for c, t in zip(chunks, chunk_idle, strict=True):
        e = entry(c)
        if e in gone:
            doomed.append(c)
        elif t is None or t < ORPHAN_AGE:
            continue  # perhaps a write under way
        elif e not in have_head:
            doomed.append(c)  # its head never came, or was evicted
        elif len(ids[e]) > 1:
            if e not in head_ids:
                head_ids[e] = _head_id(client, e)
            if head_ids[e] and c.id != head_ids[e]:
                doomed.append(c)  # a replaced writer's, or a race loser's
    doomed = list({k.raw: k for k in doomed}.values())
    sizes = _lengths(client, [k.raw for k in doomed])
    if not dry_run:
        for i in range(0, len(doomed), 500):
            client.delete(*[k.raw for k in doomed[i : i + 500]])
        if everything:
            for ns in {k.namespace for k in heads} | ({namespace} if namespace else set()):
                client.delete(_enc(f"{prefix_root(ns)}key-ids"))
    return {
        "entries_removed": sum(1 for k in doomed if k.kind == "e"),
        "chunks_removed": sum(1 for k in doomed if k.kind == "c"),
        "bytes_removed": sum(sizes),
        "entries_kept": len(heads) - len(old),
        "idle_unknown": unknown,
        "dry_run": dry_run,
    }


def _head_id(client, entry: tuple) -> str:
    """The writer id the current head of ``entry`` names (read, so made young:
    only for the rare digest with chunks of several writers)."""
    fmt, ns, host, digest = entry
    name = _enc(f"{ROOT}:{fmt}:{ns}:{host}:e:{digest}")
    try:
        text = split_entry(client.getrange(name, 0, MAX_HEAD_BYTES))[1]
        return str(json.loads(text).get("id"))
    except Exception:
        return ""


def _printable(text: str) -> str:
    """A key name's part for a terminal: undecodable bytes and control characters
    escaped (a name can be anything a Redis writer chose)."""
    text = text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text[:200])
