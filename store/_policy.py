"""Eviction policies, as data.

A policy is an ``ORDER BY`` expression over ``entries``: culling reads victims
in that order, first = evicted first.  Each expression matches an index in
``schemas/store.sql`` exactly, so picking victims reads an index and never
scans or sorts the table.  Adding a policy is adding a row here (and its index
in store.sql).

``cost`` (the default) keeps what is expensive to rebuild per byte it
occupies, aged by how long ago it was used::

    keep_score = compile_seconds / stored_size * 2 ** (-(now - last_used) / HALF_LIFE)

with compile_seconds floored at 1 ms and stored_size at 1 byte; the lowest
score is evicted first.  Taking log2 and dropping the ``now`` term (the same
for every entry, so it cannot change the order) gives an order that does not
depend on the clock and can be indexed::

    last_used / HALF_LIFE + log2(compile_seconds / stored_size)

``cost_log = log2(...)`` is computed at put time; HALF_LIFE is one day.  So an
entry that saves twice the compile time per byte survives one day longer
without use than the other; with equal costs and sizes the order is LRU.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["HALF_LIFE", "POLICIES", "Policy", "cost_log"]

HALF_LIFE = 86400.0  # seconds; must match the entries_cost index in store.sql


@dataclass(frozen=True)
class Policy:
    name: str
    order_by: str  # SQL expression; ascending = evict first
    doc: str


POLICIES: dict[str, Policy] = {
    p.name: p
    for p in (
        Policy("lru", "last_used", "least recently used first"),
        Policy("fifo", "created", "oldest put first"),
        Policy(
            "cost",
            f"(last_used / {HALF_LIFE!r} + cost_log)",
            "lowest compile-seconds-saved per stored byte, aged by a 1-day half-life, first",
        ),
    )
}


def cost_log(compile_seconds: float, stored_size: int) -> float:
    """``log2(max(compile_seconds, 1e-3) / max(stored_size, 1))`` (see module docstring)."""
    return math.log2(max(compile_seconds, 1e-3)) - math.log2(max(stored_size, 1))


def get_policy(name: str) -> Policy:
    try:
        return POLICIES[name]
    except KeyError:
        raise ValueError(f"unknown eviction policy {name!r}; valid: {sorted(POLICIES)}") from None
