"""Explaining keys and misses, part by part."""

from __future__ import annotations

from typing import Any

from pcache._key import CacheKey


def _nearest(rt, key: CacheKey, fun_name: str | None, limit: int = 3) -> list[tuple[int, Any]]:
    """Stored entries of the same function, fewest differing key parts first."""
    if rt is None:
        return []
    mine = dict(key.parts)
    scored = []
    for entry in rt.store.entries():
        if fun_name is not None and entry.function_name != fun_name:
            continue
        parts = dict((n, h) for n, h in entry.extra.get("key_parts", []))
        if not parts:
            continue
        diff = sorted(n for n in set(mine) | set(parts) if mine.get(n) != parts.get(n))
        scored.append((len(diff), entry.last_used or 0.0, diff, entry))
    scored.sort(key=lambda t: (t[0], -t[1]))
    return [(diff, entry) for _, _, diff, entry in scored[:limit]]


def _describe_nearest(rt, key: CacheKey, fun_name: str | None) -> list[str]:
    lines = []
    near = _nearest(rt, key, fun_name)
    if not near:
        lines.append(f"  no stored entry of function {fun_name!r} to compare with")
    for diff, entry in near:
        if not diff:
            lines.append(f"  {entry.key[:12]}: identical key (a hit)")
        else:
            lines.append(f"  {entry.key[:12]} differs in: {', '.join(diff)}")
    return lines


def explain_miss(rt, key: CacheKey, fun_name: str) -> str:
    if not key.persistent:
        return (
            f"pcache miss {key.digest[:12]} for {fun_name}: {_memory_only(key)}; "
            "compiled into the memory tier, never stored"
        )
    lines = [f"pcache miss {key.digest[:12]} for {fun_name}; nearest stored entries:"]
    lines += _describe_nearest(rt, key, fun_name)
    return "\n".join(lines)


def _memory_only(key: CacheKey) -> str:
    return f"valid in this process only ({key.local_why or 'process-local'})"


def explain_call(rt, key: CacheKey, fun) -> str:
    name = getattr(fun, "__name__", None)
    lines = [
        f"key {key.digest}" + ("" if key.persistent else " (memory tier only)"),
        key.describe(),
    ]
    if not key.persistent:
        lines.append(f"{_memory_only(key)}: hits the memory tier, never stored")
    if key.relower:
        lines.append(
            "keyed by its lowered module too (host callbacks, or a lowering rule "
            "mlir.lower_fun makes from code outside JAX): every call lowers it, and a "
            "hit is the stored executable of the same module (bound to this call's "
            "callbacks); the entries of this key differ from it in 'module' alone"
        )
    if rt is None:
        lines.append("pcache is not enabled: nothing to compare with")
        return "\n".join(lines)
    if key.relower:
        return "\n".join(lines)
    hit = key.digest in rt.store if key.persistent else False
    if hit:
        lines.append("stored: this call would hit")
    else:
        lines.append(
            "not stored: this call would miss; nearest stored entries of the same function:"
        )
        lines += _describe_nearest(rt, key, name)
    return "\n".join(lines)
