"""An installed library for tests: a package in a directory named ``site-packages``
with its distribution's ``METADATA`` and ``RECORD`` (what makes code a library's to
pcache: `pcache._usercode`)."""

from __future__ import annotations

from pathlib import Path


def install(site: Path, name: str, source: str, version: str = "1.0") -> Path:
    """Write package ``name`` (its ``__init__.py`` is ``source``) into ``site``."""
    (site / name).mkdir(parents=True)
    (site / name / "__init__.py").write_text(source)
    info = site / f"{name}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (info / "RECORD").write_text(f"{name}/__init__.py,,\n")
    return site
