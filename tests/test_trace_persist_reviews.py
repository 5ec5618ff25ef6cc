"""Every outside review's reproducer of a persisted false hit (issue 27), kept as a
regression test: process A fills the store, process B (``PHASE=B``: its program
differs from A's) must print what stock JAX prints in B. A file of its own, so a
second test worker runs these beside `test_trace_persist`'s.

The scenarios run one after the other in one process per phase (three processes in
all, not three per scenario: this is CI's slowest file otherwise). A scenario that
changes what the key holds for every later call (a registration, process state:
``# alone`` in its text) gets processes of its own, as a scenario run after it would
never be served, fixed or not. A canary program, the same in A and B, runs after
each scenario and must be served to B: the proof that no scenario masked the next.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.test_trace_persist import pytestmark, run  # noqa: F401 (the same skip)

SCENARIOS = sorted((Path(__file__).parent / "persist_scenarios").glob("*.py"))
ALONE = [p for p in SCENARIOS if "# alone" in p.read_text()]
BATCHES = [[p for p in SCENARIOS if p not in ALONE], *([p] for p in ALONE)]


@pytest.mark.parametrize("paths", BATCHES, ids=lambda b: b[0].stem if len(b) == 1 else "together")
def test_review_scenarios_match_stock_across_processes(tmp_path, paths):
    """B's output with A's store equals stock B's: B runs what it was served. (Check
    mode traces anyway; it is tested on the seed patterns, and it caught every one of
    these when it was found.)"""
    cache = tmp_path / "c"
    files = [str(p) for p in paths]
    run("scenario", *files, cache=cache, PHASE="A")
    stock = run("scenario", *files, cache=None, PHASE="B")
    got = run("scenario", *files, cache=cache, PHASE="B")
    assert got["digests"]["shown"] == stock["digests"]["shown"], got["stats"]
    served = got["digests"]["served"]
    # Every scenario's fix makes B differ from A: nothing of theirs is served; but
    # where the fix makes what A stores right (``# served``), and B is served it.
    right = {p.name for p in paths if "# served" in p.read_text()}
    assert all((served[p.name] > 0) == (p.name in right) for p in paths), str(
        {k: v for k, v in served.items() if (v != 0) != (k in right)}
    )
    if len(paths) > 1:  # none was masked by what an earlier one left behind
        assert served["canaries"] == [1] * len(paths), served
