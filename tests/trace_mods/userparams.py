"""A user pytree dataclass annotated with ``jax.Array`` (annotations evaluated:
no ``from __future__ import annotations`` here), for tests/test_trace_reuse.py."""

import dataclasses

import jax


@jax.tree_util.register_dataclass
@dataclasses.dataclass
class Params:
    w: jax.Array  # (a nanobind class named by its full path: jaxlib._jax.Array)
    n: int = dataclasses.field(default=2, metadata=dict(static=True))
