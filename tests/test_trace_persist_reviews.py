"""Every outside review's reproducer of a persisted false hit (issue 27), kept as a
regression test: process A fills the store, process B (``PHASE=B``: its program
differs from A's) must print what stock JAX prints in B. A file of its own, so a
second test worker runs these beside `test_trace_persist`'s.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.test_trace_persist import pytestmark, run  # noqa: F401 (the same skip)

SCENARIOS = sorted((Path(__file__).parent / "persist_scenarios").glob("*.py"))


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_review_scenarios_match_stock_across_processes(tmp_path, path):
    """B's output with A's store equals stock B's: B runs what it was served. (Check
    mode traces anyway; it is tested on the seed patterns, and it caught every one of
    these when it was found.)"""
    cache = tmp_path / "c"
    run("scenario", str(path), cache=cache, PHASE="A")
    stock = run("scenario", str(path), cache=None, PHASE="B")
    got = run("scenario", str(path), cache=cache, PHASE="B")
    assert got["digests"]["shown"] == stock["digests"]["shown"], got["stats"]
