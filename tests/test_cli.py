"""The ``pcache`` command line, through click's CliRunner and the installed command.

Cache directories are real stores: filled by real JAX compilations
(``pcache.enable``) where that is available, else by ``Store.put`` with the
metadata pcache's integration writes.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.resources
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import click
import jax
import jaxlib
import jsonschema
import pytest
import referencing
import referencing.jsonschema
from click.testing import CliRunner
from pcache.store import INLINE_THRESHOLD, Store

import pcache
from pcache._config import AGE_FORMS, ENV_VARS, SIZE_FORMS
from pcache.cli import SORT_FIELDS, cli

SCHEMAS = importlib.resources.files("pcache.store.schemas")  # the schemas/ folder, as shipped
NOW = time.time()


def schema(name: str) -> dict:
    return json.loads(SCHEMAS.joinpath(f"{name}.schema.json").read_text())


# Every JSON schema in schemas/, by its $id: cli-ls rows $ref entry.schema.json.
REGISTRY = referencing.Registry().with_resources(
    (s["$id"], referencing.jsonschema.DRAFT202012.create_resource(s))
    for s in (
        json.loads(f.read_text()) for f in SCHEMAS.iterdir() if f.name.endswith(".schema.json")
    )
)


def validate(data: object, name: str) -> None:
    """Validate against schemas/<name>.schema.json (e.g. ``cli-ls``, ``entry``)."""
    s = schema(name)
    jsonschema.Draft202012Validator.check_schema(s)
    jsonschema.Draft202012Validator(s, registry=REGISTRY).validate(data)


def key_of(name: str) -> str:
    return hashlib.sha256(name.encode()).hexdigest()


def meta(function_name: str, compile_seconds: float = 0.5, **kw: object) -> dict:
    extra = {
        "format": 1,
        "key_parts": [
            ["jaxpr", key_of(function_name + "/jaxpr")],
            ["in_avals", key_of(function_name + "/avals")],
            ["backend", key_of("cpu")],
            ["jax_version", key_of(jax.__version__)],
        ],
        "platform_version": "cpu",
        "device_ids": [0],
        "num_devices": 1,
        "hmac": "00" * 32,
    }
    m = {
        "backend": "cpu",
        "device_kind": "cpu",
        "jax_version": jax.__version__,
        "jaxlib_version": jaxlib.__version__,
        "function_name": function_name,
        "compile_seconds": compile_seconds,
        "extra": extra,
    }
    m.update(kw)
    return m


def value_of(name: str, size: int = 2000) -> bytes:
    """Deterministic, partly compressible bytes standing in for a serialized executable."""
    seed = hashlib.sha256(name.encode()).digest()
    return (seed * (size // 64 + 1))[: size // 2] + os.urandom(size - size // 2)


def set_times(directory: Path, key: str, age_seconds: float) -> None:
    """Back-date an entry (no Store may be open): the store stamps puts with now."""
    t = time.time() - age_seconds
    with sqlite3.connect(directory / "store" / "store.db") as db:
        n = db.execute(
            "UPDATE entries SET created = ?, last_used = ? WHERE key = ?", (t, t, key)
        ).rowcount
    assert n == 1


def fill(directory: Path) -> dict[str, bytes]:
    """A small cache: 5 entries for 4 functions, with hits and persisted counters."""
    values = {}
    with Store(directory / "store") as s:  # the layout pcache.enable(directory) makes
        for name, cs, size in [
            ("jit_loss", 1.25, 40_000),
            ("jit_update", 3.5, 120_000),
            ("jit_predict", 0.4, 8_000),
            ("jit_loss#2", 1.1, 30_000),
            ("pjit_train_step", 7.9, 250_000),
        ]:
            key, fn = key_of(name), name.split("#")[0]
            values[key] = value_of(name, size)
            s.put(key, values[key], meta=meta(fn, cs))
        for key, hits in zip(values, [3, 1, 0, 2, 5], strict=True):
            for _ in range(hits):
                assert s.get(key) == values[key]
        s.get(key_of("missing-1"))
        s.get(key_of("missing-2"))
    return values


@pytest.fixture
def cache(tmp_path: Path) -> Path:
    d = tmp_path / "cache"
    d.mkdir()
    fill(d)
    return d


def run(*args: str, input: str | None = None, env: dict | None = None):
    return CliRunner().invoke(
        cli, list(args), input=input, env=env, catch_exceptions=False, prog_name="pcache"
    )


# -- the group -------------------------------------------------------------------------------


def test_every_command_has_help() -> None:
    assert cli.commands, "no commands registered"
    for name, command in cli.commands.items():
        doc = (command.callback.__doc__ or "").strip()
        assert doc, f"{name} has no docstring"
        for flag in ("--help", "-h"):
            r = run(name, flag)
            assert r.exit_code == 0, (name, r.output)
            assert " ".join(doc.split("\n\n")[0].split()) in " ".join(r.output.split()), name
            assert f"Usage: pcache {name}" in r.output


def test_group_help_lists_commands_and_env() -> None:
    r = run("--help")
    assert r.exit_code == 0
    for name in ("gc", "stats", "ls", "clear", "verify", "explain", "env"):
        assert name in r.output
    for var in ENV_VARS:
        assert var in r.output


def test_version() -> None:
    r = run("--version")
    assert r.exit_code == 0
    assert importlib.metadata.version("jax-pcache") in r.output


def test_env_lists_variables(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("JAX_PCACHE_DIR", str(tmp_path))
    r = run("env")
    assert r.exit_code == 0
    for var, doc in ENV_VARS.items():
        assert var in r.output and doc in r.output
    assert f"JAX_PCACHE_DIR={tmp_path}" in r.output


@pytest.mark.parametrize(
    "args", [["stats"], ["ls"], ["gc"], ["verify"], ["clear", "--yes"], ["explain", "abcdef"]]
)
def test_missing_directory_is_an_error_and_not_created(tmp_path: Path, args: list[str]) -> None:
    d = tmp_path / "nope"
    r = run("--dir", str(d), *args)
    assert r.exit_code == 1
    assert "does not exist" in r.output and str(d) in r.output
    assert not d.exists()


def test_default_directory_from_env(monkeypatch: pytest.MonkeyPatch, cache: Path) -> None:
    monkeypatch.setenv("JAX_PCACHE_DIR", str(cache))
    r = run("ls", "--json")
    assert r.exit_code == 0
    assert len(json.loads(r.output)) == 5


# -- ls ----------------------------------------------------------------------------------------


def test_ls_table(cache: Path) -> None:
    r = run("--dir", str(cache), "ls")
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    assert lines[0].split() == [
        "KEY", "KIND", "FUNCTION", "BACKEND/DEVICE", "SIZE", "COMPILE", "HITS", "LAST", "USED"
    ]  # fmt: skip
    assert len(lines) == 6
    assert all(line.split()[1] == "exe" for line in lines[1:])
    assert key_of("jit_update")[:12] in r.output
    assert "cpu/cpu" in r.output and "just now" in r.output


def test_ls_json_matches_schema_and_store(cache: Path) -> None:
    r = run("--dir", str(cache), "ls", "--json")
    assert r.exit_code == 0
    rows = json.loads(r.output)
    validate(rows, "cli-ls")
    with Store(cache / "store") as s:
        assert rows == [e.to_dict() for e in s.entries(order_by="last_used", descending=True)]
    for row in rows:
        validate(row, "entry")  # the store's own schema: rows are Entry.to_dict()


def test_schemas_reject_wrong_shapes(cache: Path) -> None:
    rows = json.loads(run("--dir", str(cache), "ls", "--json").output)
    for bad in (
        [{**rows[0], "key": "xyz"}],
        [{**rows[0], "surprise": 1}],
        [{**rows[0], "extra": {"key_parts": [["jaxpr"]]}}],
    ):
        with pytest.raises(jsonschema.ValidationError):
            validate(bad, "cli-ls")
    data = json.loads(run("--dir", str(cache), "stats", "--json").output)
    with pytest.raises(jsonschema.ValidationError):
        validate({**data, "hit_rate": 1.5}, "cli-stats")


@pytest.mark.parametrize("field", list(SORT_FIELDS))
def test_ls_sort_and_limit(cache: Path, field: str) -> None:
    r = run("--dir", str(cache), "ls", "--json", "--sort", field, "--limit", "3")
    assert r.exit_code == 0
    rows = json.loads(r.output)
    assert len(rows) == 3
    full = json.loads(run("--dir", str(cache), "ls", "--json", "--sort", field).output)
    assert rows == full[:3]


def test_ls_sort_orders(cache: Path) -> None:
    rows = json.loads(run("--dir", str(cache), "ls", "--json", "--sort", "hits").output)
    assert [r["hits"] for r in rows] == [5, 3, 2, 1, 0]
    rows = json.loads(run("--dir", str(cache), "ls", "--json", "--sort", "function").output)
    names = [r["function_name"] for r in rows]
    assert names == sorted(names)


def test_ls_bad_sort_field_lists_fields(cache: Path) -> None:
    r = run("--dir", str(cache), "ls", "--sort", "colour")
    assert r.exit_code == 2
    for field in SORT_FIELDS:
        assert field in r.output


def test_ls_empty(tmp_path: Path) -> None:
    Store(tmp_path).close()
    r = run("--dir", str(tmp_path), "ls", "--json")
    assert r.exit_code == 0 and json.loads(r.output) == []
    r = run("--dir", str(tmp_path), "ls")
    assert r.exit_code == 0 and "No entries" in r.output


def test_directory_without_a_store_gets_none(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("not a cache")
    r = run("--dir", str(tmp_path), "ls")
    assert r.exit_code == 1 and "no pcache store" in r.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


# -- stats -------------------------------------------------------------------------------------


def test_stats_json(cache: Path) -> None:
    r = run("--dir", str(cache), "stats", "--json", "--max-size", "1MB")
    assert r.exit_code == 0, r.output
    data = json.loads(r.output)
    validate(data, "cli-stats")
    with Store(cache / "store") as s:
        st = s.stats()
    assert data["entries"] == 5
    assert data["raw_bytes"] == st["raw_bytes"] and data["stored_bytes"] == st["stored_bytes"]
    assert data["compression_ratio"] == pytest.approx(st["raw_bytes"] / st["stored_bytes"])
    assert data["max_bytes"] == 1_000_000
    assert data["disk_fraction"] == pytest.approx(st["disk_bytes"] / 1_000_000)
    assert data["hits"] == 11 and data["misses"] == 2
    assert data["hit_rate"] == pytest.approx(11 / 13)
    assert data["by_device"] == [
        {
            "backend": "cpu",
            "device_kind": "cpu",
            "entries": 5,
            "stored_bytes": st["stored_bytes"],
            "raw_bytes": st["raw_bytes"],
            "hits": 11,
        }
    ]
    top = data["top_by_hits"][0]
    assert top["function_name"] == "jit_loss" and top["hits"] == 5 and top["entries"] == 2
    assert data["top_by_compile_seconds_saved"][0]["function_name"] == "pjit_train_step"
    assert data["top_by_compile_seconds_saved"][0]["compile_seconds_saved"] == pytest.approx(
        5 * 7.9
    )
    assert data["compile_seconds_saved"] == pytest.approx(3 * 1.25 + 3.5 + 2 * 1.1 + 5 * 7.9)


def test_stats_text(cache: Path) -> None:
    r = run("--dir", str(cache), "stats")
    assert r.exit_code == 0, r.output
    for text in ("Entries", "compression", "hit rate 84.6%", "of 10 GB", "cpu/cpu"):
        assert text in r.output
    assert "Top functions by hits" in r.output and "pjit_train_step" in r.output


def test_stats_limit_from_env(cache: Path) -> None:
    r = run("--dir", str(cache), "stats", "--json", env={"JAX_PCACHE_MAX_DISK": "2MiB"})
    assert json.loads(r.output)["max_bytes"] == 2 * 1024**2


# -- bad sizes and ages --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args, forms",
    [
        (["gc", "--max-size", "lots"], SIZE_FORMS),
        (["gc", "--max-size", "-1GB"], SIZE_FORMS),
        (["stats", "--max-size", "10 parsecs"], SIZE_FORMS),
        (["gc", "--older-than", "yesterday"], AGE_FORMS),
        (["gc", "--older-than", "30"], AGE_FORMS),
    ],
)
def test_bad_size_or_age_is_usage_error(cache: Path, args: list[str], forms: str) -> None:
    r = run("--dir", str(cache), *args)
    assert r.exit_code == 2
    assert forms in " ".join(r.output.split())


def test_bad_size_in_env_is_usage_error(cache: Path) -> None:
    r = run("--dir", str(cache), "gc", env={"JAX_PCACHE_MAX_DISK": "big"})
    assert r.exit_code == 2
    assert "JAX_PCACHE_MAX_DISK" in r.output and SIZE_FORMS in " ".join(r.output.split())
    r = run("--dir", str(cache), "gc", "--max-size", "1GB", env={"JAX_PCACHE_MAX_DISK": "big"})
    assert r.exit_code == 0, r.output  # the option wins; the variable is not read


# -- gc ----------------------------------------------------------------------------------------


def gc_json(cache: Path, *args: str) -> dict:
    r = run("--dir", str(cache), "gc", "--json", *args)
    assert r.exit_code == 0, r.output
    data = json.loads(r.output)
    validate(data, "cli-gc")
    return data


def keys(cache: Path) -> set[str]:
    with Store(cache / "store") as s:
        return {e.key for e in s.entries()}


def test_gc_default_keeps_everything(cache: Path) -> None:
    before = keys(cache)
    r = run("--dir", str(cache), "gc")
    assert r.exit_code == 0, r.output
    assert "Nothing to remove" in r.output
    assert keys(cache) == before


def test_gc_older_than(cache: Path) -> None:
    old = [key_of("jit_predict"), key_of("jit_loss#2")]
    for k in old:
        set_times(cache, k, 40 * 86400)
    data = gc_json(cache, "--older-than", "30d", "--dry-run")
    assert data["dry_run"] and {e["key"] for e in data["removed"]} == set(old)
    assert len(keys(cache)) == 5
    r = run("--dir", str(cache), "gc", "--older-than", "30d")
    assert r.exit_code == 0
    assert "Removed 2 entries" in r.output and "jit_predict" in r.output
    assert keys(cache).isdisjoint(old) and len(keys(cache)) == 3


def test_gc_lists_at_most_20_removed_entries(tmp_path: Path) -> None:
    with Store(tmp_path / "store") as s:
        for i in range(30):
            s.put(key_of(f"many-{i}"), value_of(f"many-{i}", 500), meta=meta(f"jit_f{i}"))
    r = run("--dir", str(tmp_path), "gc", "--max-size", "0")
    assert r.exit_code == 0, r.output
    assert "Removed 30 entries" in r.output and "... and 10 more" in r.output
    assert keys(tmp_path) == set()


def test_gc_max_size(cache: Path) -> None:
    with Store(cache / "store") as s:
        total = s.stats()["stored_bytes"]
    data = gc_json(cache, "--max-size", str(total // 2))
    assert data["removed_count"] >= 1
    assert data["bytes_freed"] == sum(e["stored_size"] for e in data["removed"])
    with Store(cache / "store") as s:
        assert s.stats()["stored_bytes"] <= total // 2


def test_gc_stale(cache: Path) -> None:
    stale = {
        key_of("old-jax"): meta("jit_old", jax_version="0.4.30"),
        key_of("old-jaxlib"): meta("jit_old", jaxlib_version="0.4.30"),
        key_of("tpu"): meta("jit_tpu", backend="tpu", device_kind="TPU v4"),
        key_of("gpu"): meta("jit_gpu", backend="gpu", device_kind="NVIDIA H100"),
        key_of("other-cpu"): meta("jit_cpu", device_kind="some other cpu"),
    }
    with Store(cache / "store") as s:
        for k, m in stale.items():
            s.put(k, b"x" * 100, meta=m)
    fresh = keys(cache) - set(stale)
    data = gc_json(cache, "--stale")
    assert {e["key"] for e in data["removed"]} == set(stale)
    assert data["installed"]["jax_version"] == jax.__version__
    assert data["installed"]["backends"] == {"cpu": ["cpu"]}
    assert keys(cache) == fresh


def test_gc_removes_entries_whose_value_is_gone(cache: Path) -> None:
    big = key_of("jit_big")
    with Store(cache / "store") as s:
        s.put(big, os.urandom(INLINE_THRESHOLD + 1000), meta=meta("jit_big"))
    with sqlite3.connect(cache / "store" / "store.db") as db:
        (file,) = db.execute("SELECT file FROM entries WHERE key = ?", (big,)).fetchone()
    (cache / "store" / "values" / file).unlink()
    data = gc_json(cache)
    assert data["corrupt_removed"] == 1 and data["removed_count"] == 0
    assert big not in keys(cache) and len(keys(cache)) == 5
    r = run("--dir", str(cache), "gc")
    assert r.exit_code == 0 and "Nothing to remove" in r.output


# -- verify ------------------------------------------------------------------------------------


def corrupt_one(cache: Path) -> str:
    """Flip bytes of the largest entry's stored value (side file or inline blob)."""
    with sqlite3.connect(cache / "store" / "store.db") as db:
        key, file, rowid = db.execute(
            "SELECT key, file, id FROM entries ORDER BY stored_size DESC LIMIT 1"
        ).fetchone()
        if file is None:
            (data,) = db.execute("SELECT data FROM blobs WHERE id = ?", (rowid,)).fetchone()
            data = bytearray(data)
            data[len(data) // 2] ^= 0xFF
            db.execute("UPDATE blobs SET data = ? WHERE id = ?", (bytes(data), rowid))
            return key
    path = cache / "store" / "values" / file
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    return key


def test_verify_side_file_flipped(cache: Path) -> None:
    big = key_of("jit_big")
    with Store(cache / "store") as s:
        s.put(big, os.urandom(INLINE_THRESHOLD + 1000), meta=meta("jit_big"))
    with sqlite3.connect(cache / "store" / "store.db") as db:
        (file,) = db.execute("SELECT file FROM entries WHERE key = ?", (big,)).fetchone()
    path = cache / "store" / "values" / file
    data = bytearray(path.read_bytes())
    data[100:104] = bytes(b ^ 0x5A for b in data[100:104])
    path.write_bytes(bytes(data))
    r = run("--dir", str(cache), "verify")
    assert r.exit_code == 1 and f"corrupt: {big}" in r.output
    assert run("--dir", str(cache), "verify", "--fix").exit_code == 0
    assert not path.exists() and big not in keys(cache)
    r = run("--dir", str(cache), "verify")
    assert r.exit_code == 0 and "OK: 5 entries" in r.output


def test_damaged_database_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "store").mkdir()
    (tmp_path / "store" / "store.db").write_bytes(b"definitely not SQLite" * 500)
    for args in (["ls"], ["stats"], ["verify"], ["gc"]):
        r = run("--dir", str(tmp_path), *args)
        assert r.exit_code == 1, args
        assert "StoreCorruptError" in r.output and "not a database" in r.output
        assert "pcache verify --fix" in r.output
        assert "Traceback" not in r.output
    r = run("--dir", str(tmp_path), "verify", "--fix")
    assert r.exit_code == 0 and "moved it aside" in r.output, r.output
    (aside,) = (tmp_path / "store").glob("store.db.damaged-*")
    assert aside.read_bytes() == b"definitely not SQLite" * 500
    assert run("--dir", str(tmp_path), "verify").exit_code == 0
    assert run("--dir", str(tmp_path), "ls").exit_code == 0


def test_verify_ok(cache: Path) -> None:
    r = run("--dir", str(cache), "verify")
    assert r.exit_code == 0, r.output
    assert "OK: 5 entries verified" in r.output


def test_verify_corrupt_then_fix(cache: Path) -> None:
    victim = corrupt_one(cache)
    r = run("--dir", str(cache), "verify")
    assert r.exit_code == 1
    assert f"corrupt: {victim}" in r.output and "pcache verify --fix" in r.output
    assert victim in keys(cache)  # verify without --fix changes nothing
    r = run("--dir", str(cache), "verify", "--fix")
    assert r.exit_code == 0, r.output
    assert "fixed" in r.output
    assert victim not in keys(cache)
    r = run("--dir", str(cache), "verify")
    assert r.exit_code == 0 and "OK: 4 entries" in r.output


# -- clear -------------------------------------------------------------------------------------


def test_clear_refuses_without_answer(cache: Path) -> None:
    r = run("--dir", str(cache), "clear")  # CliRunner's stdin is empty
    assert r.exit_code == 1
    assert "--yes" in r.output
    assert len(keys(cache)) == 5


def test_clear_declined(cache: Path) -> None:
    r = run("--dir", str(cache), "clear", input="n\n")
    assert r.exit_code == 1 and "Remove all 5 entries" in r.output
    assert len(keys(cache)) == 5


def test_clear_confirmed_and_yes(cache: Path) -> None:
    r = run("--dir", str(cache), "clear", input="y\n")
    assert r.exit_code == 0 and "Removed 5 entries" in r.output
    assert keys(cache) == set()
    fill(cache)
    r = run("--dir", str(cache), "clear", "--yes")
    assert r.exit_code == 0 and keys(cache) == set()


# -- explain -----------------------------------------------------------------------------------


def test_explain_full_key_and_prefix(cache: Path) -> None:
    key = key_of("pjit_train_step")
    for arg in (key, key[:6], key[:12].upper()):
        r = run("--dir", str(cache), "explain", arg)
        assert r.exit_code == 0, r.output
        assert key in r.output and "pjit_train_step" in r.output
        assert "key parts (4):" in r.output
        lines = r.output.splitlines()
        start = lines.index("key parts (4):")
        assert lines[start + 1].split() == ["jaxpr", key_of("pjit_train_step/jaxpr")]


def test_explain_json(cache: Path) -> None:
    key = key_of("jit_update")
    r = run("--dir", str(cache), "explain", key[:8], "--json")
    assert r.exit_code == 0
    row = json.loads(r.output)
    validate([row], "cli-ls")
    validate(row, "entry")
    assert row["key"] == key and row["extra"]["key_parts"][0][0] == "jaxpr"


def test_explain_ambiguous_prefix(tmp_path: Path) -> None:
    a, b = "abcdef" + "0" * 58, "abcdef" + "1" * 58
    with Store(tmp_path) as s:
        s.put(a, b"a", meta=meta("f"))
        s.put(b, b"b", meta=meta("g"))
    r = run("--dir", str(tmp_path), "explain", "abcdef")
    assert r.exit_code == 1
    assert "ambiguous" in r.output and a in r.output and b in r.output
    assert run("--dir", str(tmp_path), "explain", "abcdef1").exit_code == 0


def test_explain_errors(cache: Path) -> None:
    r = run("--dir", str(cache), "explain", "abc")
    assert r.exit_code == 2 and "6 to 64 hex digits" in r.output
    r = run("--dir", str(cache), "explain", "not-hex-at-all")
    assert r.exit_code == 2
    r = run("--dir", str(cache), "explain", "0123456789")
    assert r.exit_code == 1 and "no entry" in r.output


# -- the installed command ------------------------------------------------------------------------


def pcache_commands() -> list[list[str]]:
    script = shutil.which("pcache") or str(Path(sys.executable).parent / "pcache")
    return [[script], [sys.executable, "-m", "pcache.cli"]]


@pytest.mark.parametrize("command", pcache_commands(), ids=["script", "python-m"])
def test_installed_command(cache: Path, command: list[str]) -> None:
    def sh(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [*command, "--dir", str(cache), *args], capture_output=True, text=True, timeout=60
        )

    r = sh("stats", "--json")
    assert r.returncode == 0, r.stderr
    validate(json.loads(r.stdout), "cli-stats")
    r = sh("ls", "--json", "--sort", "size")
    assert r.returncode == 0, r.stderr
    validate(json.loads(r.stdout), "cli-ls")
    r = sh("ls", "--sort", "nope")
    assert r.returncode == 2 and "last_used" in r.stderr
    r = sh("gc", "--older-than", "soon")
    assert r.returncode == 2 and AGE_FORMS in " ".join(r.stderr.split())
    r = subprocess.run(
        [*command, "--dir", str(cache), "clear"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 1 and "--yes" in r.stderr
    assert len(keys(cache)) == 5


# -- gc while another process writes ----------------------------------------------------------------

WRITER = textwrap.dedent(
    """
    import hashlib, json, os, sys, time
    from pcache.store import INLINE_THRESHOLD, Store

    directory, n, stop, result = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    put = {}
    with Store(directory) as s:
        i = -1
        # At least n puts, and on until the test has seen gc overlap them (bounded).
        while (i := i + 1) < n or (not os.path.exists(stop) and i < 100 * n):
            key = hashlib.sha256(f"writer-{i}".encode()).hexdigest()
            value = hashlib.sha256(key.encode()).digest() * (50 + i % 200)
            s.put(key, value, meta={"backend": "cpu", "device_kind": "cpu",
                                    "function_name": f"jit_w{i}", "compile_seconds": 0.1})
            put[key] = hashlib.sha256(value).hexdigest()
            if i == 0:
                print("ready", flush=True)
            time.sleep(0.005)
    # To a file: printed, a long run's keys would fill the pipe nobody reads yet.
    with open(result, "w") as f:
        json.dump(put, f)
    """
)


def test_gc_while_another_process_writes(cache: Path) -> None:
    """A writer process puts entries throughout; gc runs (in-process and as the
    installed command) keep every one of them and remove only the old entries."""
    old = {key_of("jit_predict"), key_of("jit_loss#2")}
    for k in old:
        set_times(cache, k, 2 * 3600)
    recent = keys(cache) - old
    n = 400
    stop, result = cache.parent / "stop-writing", cache.parent / "written.json"
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(cache / "store"), str(n), str(stop), str(result)],
        stdout=subprocess.PIPE,
        text=True,
    )
    policies = (["--max-size", "1GB"], ["--older-than", "1h"])
    overlapping = 0
    try:
        assert writer.stdout.readline().strip() == "ready"
        while writer.poll() is None:
            for args in policies:
                r = run("--dir", str(cache), "gc", *args)
                assert r.exit_code == 0, r.output
            if overlapping % 5 == 0:  # now and then through the installed command
                for args in policies:
                    p = subprocess.run(
                        [sys.executable, "-m", "pcache.cli", "--dir", str(cache), "gc", *args],
                        capture_output=True,
                        text=True,
                        timeout=60,
                    )
                    assert p.returncode == 0, p.stderr
            overlapping += 1
            if overlapping >= 3:
                stop.touch()
        writer.communicate(timeout=60)
    finally:
        writer.kill()
        writer.wait()
    assert writer.returncode == 0
    assert overlapping >= 3, "gc never overlapped the writer"
    put = json.loads(result.read_text())
    assert len(put) >= n
    with Store(cache / "store") as s:
        for key, digest in put.items():
            value = s.get(key)
            assert value is not None, f"writer's {key[:12]} was removed"
            assert hashlib.sha256(value).hexdigest() == digest
        present = {e.key for e in s.entries()}
    assert present.isdisjoint(old)  # what the policy should remove is gone
    assert present == recent | set(put)  # and nothing else


# -- real JAX compilations ----------------------------------------------------------------------

JAX_FILL = textwrap.dedent(
    """
    import sys
    import jax, jax.numpy as jnp
    import pcache

    pcache.enable(sys.argv[1])

    def loss(w, x):
        return jnp.sum((x @ w) ** 2)

    def predict(w, x):
        return jnp.tanh(x @ w)

    w, x = jnp.ones((8, 4)), jnp.ones((16, 8))
    for _ in range(2):
        jax.jit(loss)(w, x).block_until_ready()
        jax.jit(predict)(w, x).block_until_ready()
    jax.jit(jax.grad(loss))(w, x).block_until_ready()
    jax.jit(loss)(jnp.ones((8, 2)), x).block_until_ready()
    """
)


@pytest.mark.skipif(not hasattr(pcache, "enable"), reason="pcache.enable has not landed yet")
def test_real_jax_compilations(tmp_path: Path) -> None:
    d = tmp_path / "jaxcache"
    for _ in range(2):  # the second process hits what the first compiled
        r = subprocess.run(
            [sys.executable, "-c", JAX_FILL, str(d)], capture_output=True, text=True, timeout=120
        )
        assert r.returncode == 0, r.stderr
    rows = json.loads(run("--dir", str(d), "ls", "--json").output)
    validate(rows, "cli-ls")
    assert len(rows) >= 3
    assert {r["backend"] for r in rows} == {"cpu"}
    assert any("loss" in r["function_name"] for r in rows)
    data = json.loads(run("--dir", str(d), "stats", "--json").output)
    validate(data, "cli-stats")
    assert data["entries"] == len(rows) and data["hits"] >= 1
    # `python -c` is an "<interactive>" program: its working set lists what it used;
    # the second process preloaded from it (racing its own lookups: exact counts are
    # tested in test_preload.py), never the entry whose lookup started the preload.
    ((ws),) = data["working_sets"]
    assert ws["name"].startswith("<interactive> [cpu/cpu, jax ") and ws["keys"] == len(rows)
    assert data["counters"].get("preload_hits", 0) <= len(rows) - 1
    assert "Working sets" in run("--dir", str(d), "stats").output
    key = rows[0]["key"]
    r = run("--dir", str(d), "explain", key[:10])
    assert r.exit_code == 0 and key in r.output
    assert run("--dir", str(d), "verify").exit_code == 0
    assert gc_json(d, "--stale")["removed_count"] == 0
    script = pcache_commands()[0]
    p = subprocess.run([*script, "--dir", str(d), "ls"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert all(r["key"][:12] in p.stdout for r in rows)


def test_progress_callback_draws_only_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    from pcache import cli as cli_mod

    bars = []

    class FakeBar:
        def __init__(self, **kw: object) -> None:
            self.kw, self.done = kw, 0
            bars.append(self)

        def __enter__(self):
            return self

        def __exit__(self, *a: object) -> None:
            pass

        def update(self, n: int) -> None:
            self.done += n

    monkeypatch.setattr(click, "progressbar", FakeBar)
    with cli_mod._Progress("x", delay=0) as p:
        p.enabled = False
        p(1, 10)
    assert bars == []
    with cli_mod._Progress("x", delay=0) as p:
        p.enabled = True
        for i in range(1, 11):
            p(i, 10)
    assert len(bars) == 1 and bars[0].done == 10 and bars[0].kw["length"] == 10


def test_gc_sweeps_unheld_stale_lock_files_only(cache: Path) -> None:
    locks = cache / "locks"
    locks.mkdir()
    old, fresh, held = (locks / f"{n * 64}.lock" for n in "abc")
    for p in (old, fresh, held):
        p.touch()
    two_hours_ago = time.time() - 7200
    for p in (old, held):
        os.utime(p, (two_hours_ago, two_hours_ago))
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
            import time, filelock
            lock = filelock.FileLock({str(held)!r}, is_singleton=False)
            lock.acquire()
            print("held", flush=True)
            time.sleep(60)
        """),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        result = run("--dir", str(cache), "gc", "--json")
    finally:
        holder.kill()
        holder.wait()
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    validate(data, "cli-gc")
    assert data["locks_removed"] == 1
    assert not old.exists() and fresh.exists() and held.exists()
