"""An installed library for tests: a package in a directory named ``site-packages``
with its distribution's ``METADATA`` and ``RECORD`` (what makes code a library's to
pcache: `pcache._usercode`)."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def install(site: Path, name: str, source: str, version: str = "1.0") -> Path:
    """Write package ``name`` (its ``__init__.py`` is ``source``) into ``site``."""
    (site / name).mkdir(parents=True)
    (site / name / "__init__.py").write_text(source)
    info = site / f"{name}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (info / "RECORD").write_text(f"{name}/__init__.py,,\n")
    return site


def imported(site: Path, name: str, monkeypatch: Any) -> Iterator[Any]:
    """A fixture's body: package ``name`` imported from ``site`` for one test (removed
    from ``sys.modules`` after it: the next test imports it afresh)."""
    monkeypatch.syspath_prepend(str(site))
    importlib.invalidate_caches()
    yield importlib.import_module(name)
    sys.modules.pop(name, None)
