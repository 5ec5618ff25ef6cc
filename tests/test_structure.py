"""The package's shape: install names, and which modules may import what."""

from __future__ import annotations

import json
import subprocess
import sys


def test_store_is_installed_as_pcache_store_and_never_imports_jax(tmp_path):
    """A fresh interpreter, outside the repository (so its store/ folder is not on
    the path): `pcache.store` imports without JAX, finds its schema as package data,
    and no top-level `store` module is installed (a PyPI package of that name, or a
    user's store.py, would collide with it)."""
    code = """
import importlib.resources, importlib.util, json, sys
import pcache.store as s
sql = importlib.resources.files("pcache.store.schemas").joinpath("store.sql").read_text()
print(json.dumps({
    "jax": sorted(m for m in sys.modules if m == "jax" or m.startswith(("jax.", "jaxlib"))),
    "top_level_store": importlib.util.find_spec("store") is not None,
    "schema": "CREATE TABLE IF NOT EXISTS entries" in sql,
    "store_class": s.Store.__module__,
}))
"""
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True
    )
    got = json.loads(out.stdout)
    assert got == {
        "jax": [],
        "top_level_store": False,
        "schema": True,
        "store_class": "pcache.store._store",
    }
