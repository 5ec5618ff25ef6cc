"""Persisted traces (issue 27): a warm new process that does not trace.

Every claim is about separate processes, so every test runs fresh ones
(`tests.persist_prog`), switched on by the environment alone (``JAX_PCACHE_DIR``,
``JAX_PCACHE_TRACE_PERSIST=1``), and compares their results bitwise with JAX alone.
"""

from __future__ import annotations

import atexit
import copy
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import numpy as np
import pytest

from pcache import _compat
from tests import zygote

pytestmark = pytest.mark.skipif(not _compat.JIT_SEAM or _compat.LINE_09, reason="JAX 0.10 line")

ROOT = Path(__file__).resolve().parent.parent


def run(*args: str, cache: Path | None, **env: str) -> dict:
    e = {k: v for k, v in os.environ.items() if not k.startswith("JAX_PCACHE")}
    e.update({"JAX_PLATFORMS": "cpu", "PYTHONPATH": str(ROOT)})
    if cache is not None:
        e.update(JAX_PCACHE_DIR=str(cache), JAX_PCACHE_TRACE_PERSIST="1")
        # (every trace stored and looked up: the key's tests, not the cost policy's)
        e["JAX_PCACHE_TRACE_PERSIST_MIN_GAIN"] = "0"
        e["JAX_PCACHE_RAISE_ERRORS"] = "1"
        # (what tells A from B in a review's scenario, read at module level and keyed
        # by what it changes there)
        e["JAX_PCACHE_TRACE_PERSIST_ENV_IGNORE"] = "PHASE"
    e.update(env)
    got = zygote.run(["-m", "tests.persist_prog", *args], e, ROOT, 300)
    assert got.returncode == 0, got.stderr[-4000:]
    return json.loads(got.stdout.strip().splitlines()[-1])


def phases(prog: Path, site: Path, cache: Path) -> tuple[dict, dict, dict]:
    """Scenario file ``prog`` run as A (storing into ``cache``), as stock B and as B
    with A's store, an installed library's ``site`` on the path."""
    env = {"PYTHONPATH": f"{ROOT}{os.pathsep}{site}"}
    a = run("scenario", str(prog), cache=cache, PHASE="A", **env)
    stock = run("scenario", str(prog), cache=None, PHASE="B", **env)
    return a, stock, run("scenario", str(prog), cache=cache, PHASE="B", **env)


@pytest.fixture(scope="module")
def patterns(tmp_path_factory):
    cache = tmp_path_factory.mktemp("persist")
    stock = run("patterns", cache=None)
    cold = run("patterns", cache=cache)
    warm = run("patterns", cache=cache)
    return stock, cold, warm, cache


def test_seed_patterns_are_served_to_a_new_process(patterns):
    stock, cold, warm, _ = patterns
    n = len(stock["digests"])
    assert cold["digests"] == stock["digests"] == warm["digests"]
    assert cold["stats"]["trace_persist_writes"] == n, cold["stats"]
    st = warm["stats"]
    # every top-level program served, nothing traced, lowered or compiled
    assert st["trace_persist_hits"] == n, st
    assert st["trace_persist_misses"] == {}, st
    assert st["compiles"] == 0 and st["misses"] == 0, st
    assert warm["trace_seconds"] < 0.1 * cold["trace_seconds"], (warm, cold)


def test_check_mode_traces_and_agrees(patterns):
    stock, _, _, cache = patterns
    checked = run("patterns", cache=cache, JAX_PCACHE_CHECK="1")
    assert checked["digests"] == stock["digests"]
    assert checked["stats"]["trace_persist_hits"] == len(stock["digests"])


def test_ls_shows_persisted_traces_by_kind(patterns):
    """`pcache ls` tells a persisted trace from an executable (KIND column)."""
    stock, _, _, cache = patterns
    out = subprocess.run(
        [sys.executable, "-m", "pcache.cli", "--dir", str(cache), "ls"],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    kinds = [line.split()[1] for line in out.stdout.splitlines()[1:]]
    assert kinds.count("trace") == len(stock["digests"]), out.stdout
    assert "exe" in kinds and set(kinds) == {"exe", "trace"}


def stored_traces(cache: Path) -> list[dict]:
    """Every persisted trace's value in ``cache``, checked against
    schemas/trace-entry.schema.json (after its head)."""
    from importlib import resources

    import jsonschema
    from pcache.store import Store

    from pcache import _persist

    schema = json.loads(
        resources.files("pcache.store.schemas").joinpath("trace-entry.schema.json").read_text()
    )
    store = Store(cache / "store")
    out = []
    try:
        for e in store.entries():
            if (e.extra.get("load") or {}).get("kind") == "trace":
                raw = store.get(e.key)
                assert raw.startswith(_persist.HEAD)
                out.append(json.loads(raw[len(_persist.HEAD) :]))
                jsonschema.validate(out[-1], schema)
    finally:
        store.close()
    return out


def test_stored_traces_match_their_schema(patterns):
    stock, _, _, cache = patterns
    assert len(stored_traces(cache)) == len(stock["digests"])


def test_off_by_default(tmp_path):
    e = {"JAX_PCACHE_TRACE_PERSIST": "0"}
    for _ in range(2):
        got = run("patterns", cache=tmp_path, **e)
        assert got["stats"]["trace_persist_hits"] == 0
        assert got["stats"]["trace_persist_writes"] == 0


def test_damaged_entry_is_refused_and_the_program_traces(patterns, tmp_path):
    import sqlite3

    stock, _, _, cache = patterns
    copy = tmp_path / "c"
    shutil.copytree(cache, copy)
    db = copy / "store" / "store.db"
    con = sqlite3.connect(db)
    try:
        # flip one byte of every trace entry's signed metadata's load record
        rows = con.execute("SELECT key, extra FROM entries").fetchall()
        n = 0
        for key, extra in rows:
            d = json.loads(extra)
            if (d.get("load") or {}).get("kind") == "trace":
                d["load"]["trace_format"] = 3.0 if n % 2 else 2
                con.execute("UPDATE entries SET extra = ? WHERE key = ?", (json.dumps(d), key))
                n += 1
        con.commit()
    finally:
        con.close()
    assert n == len(stock["digests"])
    got = run("patterns", cache=copy, JAX_PCACHE_RAISE_ERRORS="0")
    assert got["digests"] == stock["digests"]
    assert got["stats"]["trace_persist_hits"] == 0


MODULE = """{head}
import dataclasses
import typing

import jax.numpy as jnp

SCALE = {scale}


@dataclasses.dataclass(frozen=True)
class Cfg:
    k: float = {field}


CFG = Cfg()


class Hp(typing.NamedTuple):
    lr: float = {ntfield}


HP = Hp()


def helper(a, b={default}):
    return jnp.sin(a) * b


def step(x):
    {pad}return helper(x) * SCALE + CFG.k * {body} + HP.lr
"""
BASE = dict(scale="2.0", field="0.5", default="3.0", body="x", pad="", head="", ntfield="0.25")


_FIRST: list = []  # the module as written, run once per file: (its directory, the row)


def _write_module(src: Path, **change) -> None:
    (src / "pmod.py").write_text(MODULE.format(**{**BASE, **change}))
    for pyc in src.rglob("*.pyc"):
        pyc.unlink()


def _module_runs(tmp_path, **change):
    """A user module run twice: as written (one first process per file, its cache
    copied), then with ``change``; the second process against JAX alone. (The
    module's directory is the file's: its tests run one after the other.)"""
    if not _FIRST:
        made = Path(tempfile.mkdtemp(prefix="pcache-persist-module-"))
        atexit.register(shutil.rmtree, made, True)
        (made / "src").mkdir()
        _write_module(made / "src")
        _FIRST.append((made, run("module", str(made / "src"), cache=made / "cache")))
    made, first = _FIRST[0]
    src, cache = made / "src", tmp_path / "cache"
    shutil.copytree(made / "cache", cache)
    try:
        _write_module(src, **change)
        second = run("module", str(src), cache=cache)
        stock = run("module", str(src), cache=None)
    finally:
        _write_module(src)
    assert second["digests"] == stock["digests"]
    return copy.deepcopy(first), second


def test_unchanged_module_is_served(tmp_path):
    first, second = _module_runs(tmp_path)
    assert first["stats"]["trace_persist_writes"] == 1
    assert second["stats"]["trace_persist_hits"] == 1
    assert second["digests"] == first["digests"]


def test_code_moved_to_other_lines_is_served(tmp_path):
    """Every function on other lines, the jitted one too (whose name and place JAX
    records as ``step at pmod.py:N``)."""
    first, second = _module_runs(tmp_path, pad="\n    ", head="\n\n# moved\n")
    assert second["stats"]["trace_persist_hits"] == 1


@pytest.mark.parametrize(
    "change",
    [
        {"scale": "3.0"},  # a module constant
        {"scale": "2.0000000000000004"},  # by its bits (the same float32 result)
        {"body": "(x + 1)"},  # a function body
        {"default": "4.0"},  # a default
        {"field": "0.25"},  # a frozen dataclass field
        {"ntfield": "0.5"},  # a NamedTuple field's default
    ],
    ids=["constant", "constant-bits", "body", "default", "dataclass-field", "namedtuple-field"],
)
def test_stale_across_processes_traces_again(tmp_path, change):
    first, second = _module_runs(tmp_path, **change)  # (second: bitwise stock)
    assert second["stats"]["trace_persist_hits"] == 0
    assert second["stats"]["trace_persist_misses"].get("absent") == 1
    if change != {"scale": "2.0000000000000004"}:
        assert second["digests"] != first["digests"]


@pytest.mark.parametrize(
    "env", [{"JAX_ENABLE_X64": "1"}, {"JAX_DEFAULT_MATMUL_PRECISION": "highest"}]
)
def test_a_jax_setting_changed_traces_again(patterns, tmp_path, env):
    cache = tmp_path / "cache"
    shutil.copytree(patterns[3], cache)  # (the patterns' traces, stored)
    second = run("patterns", cache=cache, **env)
    stock = run("patterns", cache=None, **env)
    assert second["digests"] == stock["digests"]
    assert second["stats"]["trace_persist_hits"] == 0


def test_a_library_version_changed_traces_again(tmp_path):
    """A fake distribution on the path: its version is in the key."""
    # (under a directory named site-packages: installed library code by path)
    cache, site = tmp_path / "cache", tmp_path / "lib" / "site-packages"
    src = tmp_path / "src"
    src.mkdir()
    (src / "pmod.py").write_text(
        textwrap.dedent(
            """
            import jax.numpy as jnp
            import fakelib

            def step(x):
                return jnp.cos(x) * fakelib.K
            """
        )
    )

    def install(version: str) -> None:
        pkg, info = site / "fakelib", site / f"fakelib-{version}.dist-info"
        if site.exists():
            shutil.rmtree(site)
        pkg.mkdir(parents=True)
        (pkg / "__init__.py").write_text("K = 2.0\n")
        info.mkdir()
        (info / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: fakelib\nVersion: {version}\n"
        )
        (info / "RECORD").write_text("fakelib/__init__.py,,\n")
        (info / "top_level.txt").write_text("fakelib\n")

    paths = f"{ROOT}{os.pathsep}{site}"
    install("1.0")
    first = run("module", str(src), cache=cache, PYTHONPATH=paths)
    again = run("module", str(src), cache=cache, PYTHONPATH=paths)
    install("1.1")
    second = run("module", str(src), cache=cache, PYTHONPATH=paths)
    assert first["stats"]["trace_persist_writes"] == 1, first["stats"]
    assert again["stats"]["trace_persist_hits"] == 1, again["stats"]
    assert second["stats"]["trace_persist_hits"] == 0, second["stats"]
    assert second["digests"] == first["digests"]


def test_a_class_a_library_function_made_is_named_by_its_held_instance(tmp_path):
    """lineax's ``_qr_token = eqxi.str2jax("qr_token")``: a class made in a library
    function, registered as a pytree node, that no module holds by name; every key
    walks the user pytree nodes, so it is named by the module attribute holding its
    instance (before: no trace of the process was stored). Its content is walked:
    another token text in B traces again."""
    cache, site = tmp_path / "cache", tmp_path / "lib" / "site-packages"
    src = tmp_path / "src"
    src.mkdir()
    (src / "pmod.py").write_text(
        "import jax.numpy as jnp\nimport toklib  # noqa: F401\n\n\n"
        "def step(x):\n    return jnp.cos(x) * 2.0\n"
    )

    def install(text: str) -> None:
        if site.exists():
            shutil.rmtree(site)
        (site / "toklib").mkdir(parents=True)
        (site / "toklib" / "__init__.py").write_text(
            textwrap.dedent(
                f"""
                import jax

                def make(msg):
                    class M:
                        def __repr__(self):
                            return msg

                    M.__name__ = M.__qualname__ = msg
                    jax.tree_util.register_pytree_node(M, lambda m: ((), None), lambda a, c: m)
                    return M()

                _tok = make({text!r})
                """
            )
        )
        info = site / "toklib-1.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toklib\nVersion: 1.0\n")
        (info / "RECORD").write_text("toklib/__init__.py,,\n")

    env = {"PYTHONPATH": f"{ROOT}{os.pathsep}{site}"}
    install("qr_token")
    first = run("module", str(src), cache=cache, **env)
    again = run("module", str(src), cache=cache, **env)
    install("lu_token")
    other = run("module", str(src), cache=cache, **env)
    assert first["stats"]["trace_persist_writes"] == 1, first["stats"]
    assert again["stats"]["trace_persist_hits"] == 1, again["stats"]
    assert other["stats"]["trace_persist_hits"] == 0, other["stats"]
    assert other["digests"] == first["digests"]


def test_a_library_imported_at_another_time_is_served(tmp_path):
    """scipy registers its Cython arrays on ``Sequence`` when imported, and when it
    is imported varies between processes (a served trace skips the lowering that
    imports it; the preload thread imports it while loading): B, which never
    imports it, is served both programs A traced before and after importing it."""
    prog = tmp_path / "prog.py"
    prog.write_text(
        textwrap.dedent(
            """
            import os
            show("before", lambda: jax.jit(lambda a: a * 2.0)(x))
            if os.environ["PHASE"] == "A":
                import scipy.linalg  # noqa: F401
            show("after", lambda: jax.jit(lambda a: a - 1.0)(x))
            """
        )
    )
    cache = tmp_path / "cache"
    run("scenario", str(prog), cache=cache, PHASE="A")
    got = run("scenario", str(prog), cache=cache, PHASE="B")
    assert got["digests"]["served"]["prog.py"] == 2, got["stats"]


def test_a_library_installed_as_links_is_attributed(tmp_path):
    """An environment of links into a store (Nix, a linked venv): a library whose
    site-packages entries are symbolic links is still its distribution's, and served
    (found on the GPU machine, where every library but JAX was linked in)."""
    # (the store, another environment's site-packages: library code by path)
    cache, site = tmp_path / "cache", tmp_path / "lib" / "site-packages"
    store = tmp_path / "store" / "site-packages"
    src = tmp_path / "src"
    src.mkdir()
    (src / "pmod.py").write_text("import fakelib\n\ndef step(x):\n    return x * fakelib.K\n")
    (store / "fakelib").mkdir(parents=True)
    (store / "fakelib" / "__init__.py").write_text("K = 2.0\n")
    info = store / "fakelib-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fakelib\nVersion: 1.0\n")
    (info / "RECORD").write_text("fakelib/__init__.py,,\n")
    site.mkdir(parents=True)
    for entry in store.iterdir():
        (site / entry.name).symlink_to(entry, target_is_directory=True)
    paths = f"{ROOT}{os.pathsep}{site}"
    first = run("module", str(src), cache=cache, PYTHONPATH=paths)
    again = run("module", str(src), cache=cache, PYTHONPATH=paths)
    assert first["stats"]["trace_persist_writes"] == 1, first["stats"]
    assert again["stats"]["trace_persist_hits"] == 1, again["stats"]
    assert again["digests"] == first["digests"]


# -- what the environment part of the key reads (review 62), without a JAX process --------

SET_ORDER = """
import json
from pcache._persist_key import code_digest
a = compile("for s in {'pa', 'ab'}: pass", "m", "exec")
b = compile("for s in {'ab', 'pa'}: pass", "m", "exec")
sets = [[list(k) for k in c.co_consts if type(k) is frozenset] for c in (a, b)]
print(json.dumps([sets[0] != sets[1], code_digest(a) != code_digest(b)]))
"""


@pytest.mark.parametrize("seed", ["0", None])
def test_a_string_set_is_keyed_in_its_order_under_a_pinned_seed(seed):
    """Under a pinned seed a set literal iterates in an order its listing decides
    (two strings in one slot), which a trace may depend on: keyed in that order. With
    the seed drawn per process, keyed sorted (documented: every process would miss)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONHASHSEED"}
    if seed is not None:
        env["PYTHONHASHSEED"] = seed
    out = subprocess.run([sys.executable, "-c", SET_ORDER], env=env, cwd=ROOT,
                         capture_output=True, text=True, check=True)  # fmt: skip
    orders_differ, digests_differ = json.loads(out.stdout.strip().splitlines()[-1])
    if seed is not None:
        assert orders_differ and digests_differ  # (under seed 0 these two collide)
    else:
        assert not digests_differ


SET_ORDER_DRAWN = """
import json
from pcache._persist_key import code_digest
def keyed(lit):
    code = compile(f"for s in {lit}: pass", "m", "exec")
    fs = next(k for k in code.co_consts if type(k) is frozenset)
    return [k for k in fs if type(k) is not str], code_digest(code)
pairs = [("{None, 1.0, 9.0, 17.0}", "{9.0, 17.0, None, 1.0}"), ("{'s', 1.0, 9.0}", "{'s', 9.0, 1.0}"),
         ("{'pa', 'ab'}", "{'ab', 'pa'}")]
got = [[keyed(a)[0] != keyed(b)[0], keyed(a)[1] != keyed(b)[1]] for a, b in pairs]
def whole(lit):
    code = compile(f"for s in {lit}: pass", "m", "exec")
    return list(next(k for k in code.co_consts if type(k) is frozenset)), code_digest(code)
(a, da), (b, db) = whole("{0, ''}"), whole("{'', 0}")  # ('' hashes to 0: review 197)
print(json.dumps([*got, [a != b, da != db]]))
"""


def test_a_set_is_keyed_in_the_order_its_unseeded_items_iterate_in():
    """With the seed drawn per process, a set literal's strings land where the draw
    puts them (keyed sorted), but ``None`` (its address's low bits) and numbers land
    where their hashes and the literal's order put them, alike in every process, and
    a trace may read that order (review 196: ``None`` was taken as seeded, and a set
    holding a string keyed all of its items sorted), nor an empty string (its hash is
    0 under every seed: review 197): keyed in it."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONHASHSEED"}
    out = subprocess.run([sys.executable, "-c", SET_ORDER_DRAWN], env=env, cwd=ROOT,
                         capture_output=True, text=True, check=True)  # fmt: skip
    (none_order, none_key), (mixed_order, mixed_key), (_, strings_key), empty = json.loads(
        out.stdout.strip().splitlines()[-1]
    )
    assert none_order and none_key  # (1, 9 and 17 share a slot of 8: their order)
    assert mixed_key == mixed_order
    assert not strings_key
    assert empty == [True, True]  # ("" and 0 share slot 0 under every seed)


def test_shadowing_files_in_archives_sourceless_packages_and_vendored_dirs(tmp_path, monkeypatch):
    """A user copy of a stdlib module in a zip on ``sys.path``, as a package holding
    only ``__init__.pyc``, or in a directory nested in a site directory: each keyed by
    content (review 62; a plain directory's: review 60)."""
    import zipfile

    from pcache import _persist_env

    site = tmp_path / "site"
    (site / "vlib-1.0.dist-info").mkdir(parents=True)
    (site / "vlib-1.0.dist-info" / "RECORD").write_text("vlib/__init__.py,,\n")
    (site / "vlib" / "_vendor").mkdir(parents=True)
    (site / "vlib" / "_vendor" / "stringprep.py").write_text("X = 1\n")
    (tmp_path / "pkg" / "stringprep").mkdir(parents=True)
    (tmp_path / "pkg" / "stringprep" / "__init__.pyc").write_bytes(b"not really")
    with zipfile.ZipFile(tmp_path / "lib.zip", "w") as z:
        z.writestr("stringprep.py", "X = 2\n")
    entries = [str(tmp_path / "lib.zip"), str(tmp_path / "pkg"), str(site / "vlib" / "_vendor")]
    monkeypatch.setattr(sys, "path", [*entries, str(site), *sys.path])
    got = {(entry, name) for entry, name, _ in _persist_env.shadowing_files()}
    assert {
        (entries[0], "stringprep.py"),
        (entries[1], os.path.join("stringprep", "__init__.pyc")),
        (entries[2], "stringprep.py"),
    } <= got


def test_distributions_are_keyed_in_path_order(tmp_path, monkeypatch):
    """Two versions of one distribution on ``sys.path``: the first one's modules
    load, so their order is in the key (review 62)."""
    from pcache import _persist_env

    for d, v in (("s1", "1.0"), ("s2", "2.0")):
        (tmp_path / d / f"fakelib-{v}.dist-info").mkdir(parents=True)
    one = [str(tmp_path / "s1"), str(tmp_path / "s2")]
    monkeypatch.setattr(sys, "path", one)
    first = _persist_env.distributions()
    monkeypatch.setattr(sys, "path", one[::-1])
    assert first != _persist_env.distributions()


def test_distributions_see_an_install_after_a_listing_was_kept(tmp_path, monkeypatch):
    """A site directory's listing is kept while its modification and change times say
    it is unchanged and settled; an install or removal changes them, a tool that sets
    the modification time back still moves the change time (review 105), and a
    listing made in the same clock tick as a change is not kept."""
    from pcache import _persist_env

    site = tmp_path / "site"
    (site / "fakelib-1.0.dist-info").mkdir(parents=True)
    monkeypatch.setattr(sys, "path", [str(site)])
    fresh = _persist_env.distributions()
    assert fresh == (("fakelib-1.0.dist-info",),)
    assert str(site) not in _persist_env._LISTINGS  # (changed under 2 s ago: not kept)
    monkeypatch.setattr(_persist_env, "_SETTLED_NS", -1)  # (every time settled)
    assert _persist_env.distributions() == fresh
    assert str(site) in _persist_env._LISTINGS
    (site / "fakelib-1.0.dist-info").rename(site / "fakelib-1.1.dist-info")
    assert _persist_env.distributions() == (("fakelib-1.1.dist-info",),)
    before = os.stat(site).st_mtime_ns
    (site / "otherlib-2.0.dist-info").mkdir()
    os.utime(site, ns=(before, before))  # (an install that put the time back)
    assert "otherlib-2.0.dist-info" in _persist_env.distributions()[0]


def test_a_chain_of_sub_jaxprs_past_the_stack_is_refused():
    """A (signed) entry whose sub-jaxprs call each other thousands deep decodes
    (its references are flat) but its digest recurses past the interpreter's stack:
    the entry is refused, not a RecursionError (review 105)."""
    import jax
    import jax.numpy as jnp

    from pcache import _compat, _persist
    from pcache._compat import jaxpr_codec as C

    inner = jax.jit(lambda x: jnp.sin(x))
    data = C.encode(jax.jit(lambda x: inner(x)).trace(jnp.arange(3.0)).jaxpr)
    call = data["jaxprs"][-1]
    assert any(e[3].get("jaxpr") for e in call["eqns"])  # (the inner jit's equation)
    jaxprs = data["jaxprs"][:-1]
    closeds = [[n, []] for n in range(len(jaxprs))]  # (closed jaxpr n: jaxpr n's)
    for _ in range(sys.getrecursionlimit() * 2):
        j = copy.deepcopy(call)
        for e in j["eqns"]:
            if e[3].get("jaxpr"):
                e[3]["jaxpr"] = ["CJ", len(jaxprs) - 1]
        jaxprs.append(j)
        closeds.append([len(jaxprs) - 1, []])
    data = {**data, "jaxprs": jaxprs, "closeds": closeds, "root": ["CJ", len(closeds) - 1]}
    key = "0" * 64
    tree = _compat.out_tree_data(jax.tree_util.tree_structure(0.0))
    entry = {"trace_format": _persist.TRACE_FORMAT, "key": key, "function_name": "f",
             "trace_seconds": 0.0, "jaxpr_digest": "0" * 64, "out_tree": tree,
             "result_paths": [""], "jaxpr": data, "library_rules": [],
             "module_reads": {"names": [], "digest": ""}}  # fmt: skip
    raw = _persist.HEAD + json.dumps(entry, separators=(",", ":")).encode()
    with pytest.raises(_persist.Bad, match="too-deep"):
        _persist.decode(raw, key)


@pytest.mark.parametrize(
    ("value", "seed"), [("+1", "1"), (" 7", "7"), ("random", "random"), ("x", "random")]
)
def test_the_hash_seed_is_read_as_the_interpreter_reads_it(value, seed):
    """``PYTHONHASHSEED="+1"`` pins the seed (CPython parses it with ``strtoul``): the
    key must say so, or a string set is keyed sorted while it iterates in its
    listing's order (review 64)."""
    env = {**os.environ, "PYTHONHASHSEED": value}
    code = "from pcache._persist_key import HASH_SEED; print(HASH_SEED)"
    try:
        out = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT,
                             capture_output=True, text=True, check=True)  # fmt: skip
    except subprocess.CalledProcessError as e:
        assert value == "x" and "PYTHONHASHSEED" in e.stderr  # (the interpreter refuses it)
        return
    assert out.stdout.split()[-1] == seed


def test_pcache_s_own_modules_are_never_the_program_s():
    """pcache's modules, its store's and schemas' packages included wherever the
    import system found them, are not user code the persisted key digests (a write
    imports ``pcache.store.schemas``: keyed, a writer's keys differed from a
    reader's where an editable install's finder put the store elsewhere)."""
    import pcache.store.schemas  # noqa: F401

    from pcache import _persist_env

    own = [n for n in list(sys.modules) if n == "pcache" or n.startswith("pcache.")]
    assert "pcache.store.schemas" in own and "pcache.store._db" in own
    assert [n for n in own if _persist_env.user_module(n, sys.modules[n])] == []


def test_custom_rules_are_served_to_dispatch_only(tmp_path):
    """Programs holding custom_jvp/custom_vjp rules (the program's own, and JAX's
    ``relu``) are stored with stand-ins for the rules and served to a new process's
    top-level dispatch; ``.trace()``/``.lower()``/``.eval_shape()`` are not served
    them, and the jit object served is traced afresh when transformed: every result
    bitwise stock (a stand-in reached would raise), in check mode too."""
    prog = str(ROOT / "tests" / "trace_mods" / "custom_rules_scenario.py")
    cache = tmp_path / "c"
    a = run("scenario", prog, cache=cache)
    assert a["stats"]["trace_persist_writes"] >= 4, a["stats"]
    stock = run("scenario", prog, cache=None)
    b = run("scenario", prog, cache=cache)
    assert b["digests"]["shown"] == stock["digests"]["shown"]
    assert not any(" EXC " in s for s in stock["digests"]["shown"])
    assert sum(t["jaxpr"]["standins"] for t in stored_traces(cache)) >= 4
    assert b["digests"]["served"]["custom_rules_scenario.py"] >= 4, b["stats"]
    misses = b["stats"]["trace_persist_misses"]
    assert misses.get("dispatch-only", 0) >= 3, misses  # (trace, lower, eval_shape)
    checked = run("scenario", prog, cache=cache, JAX_PCACHE_CHECK="1")
    assert checked["digests"]["shown"] == stock["digests"]["shown"]


def test_namedtuple_outputs_are_served_as_the_classes_a_trace_makes(tmp_path):
    """Output trees holding NamedTuples (the program's, nested, and JAX's own) are
    stored by class name and served as the very classes; a class its module no
    longer names under its name, and a local class, are not stored."""
    prog = str(ROOT / "tests" / "trace_mods" / "namedtuple_out_scenario.py")
    cache = tmp_path / "c"
    a = run("scenario", prog, cache=cache)
    stock = run("scenario", prog, cache=None)
    b = run("scenario", prog, cache=cache)
    assert b["digests"]["shown"] == stock["digests"]["shown"]
    assert not any(" EXC " in s for s in stock["digests"]["shown"])
    refused = {k for k in a["stats"]["trace_persist_misses"] if k != "absent"}
    assert len(refused) == 2, refused  # (the key already has no name for either class)
    assert b["digests"]["served"]["namedtuple_out_scenario.py"] >= 2, b["stats"]
    assert not b["stats"]["trace_persist_misses"].get("absent"), b["stats"]  # (all found)
    trees = [t["out_tree"] for t in stored_traces(cache) if type(t["out_tree"]) is list]
    assert len(trees) == 2 and trees[0][0] in ("N", "t"), trees


def test_an_output_tree_naming_what_is_not_that_namedtuple_is_refused():
    """A stored tree's NamedTuple resolves only to a loaded class of that module and
    name that is a NamedTuple of those fields: anything else (a module not loaded, a
    function, a plain class, other fields, a bad shape) is a ValueError: the entry
    is refused, nothing imported or called."""
    import jax

    from pcache import _compat
    from pcache._compat import traces

    t = jax.tree_util.tree_structure(jax.numpy.linalg.slogdet(jax.numpy.eye(2)))
    data = _compat.out_tree_data(t)
    assert data[:3] == ["N", "jax._src.numpy.linalg", "SlogdetResult"] and data[4] == "fixed"
    assert _compat.out_tree_of(data) == t
    for bad in [
        ["N", "no_such_module_pcache", "X", ["a"], "*"],
        ["N", "os", "system", ["a"], "*"],
        ["N", "collections", "OrderedDict", ["a"], "*"],
        [*data[:3], ["logabsdet", "sign"], *data[4:]],
        [*data[:4], data[4], "*"],
        ["N", "jax._src.numpy.linalg", "<locals>.SlogdetResult", data[3], *data[4:]],
        ["x", "*"],
        ["d", [1], "*"],
        ["d", ["b", "a"], "*", "*"],
        ["d", ["a", "a"], "*", "*"],
        "**",
        ["t", *[["t"]] * 2, 5],
    ]:
        with pytest.raises(ValueError):
            _compat.out_tree_of(bad)
    from pcache._compat.jaxpr_arrays import Stale

    with pytest.raises(Stale):  # (another class's stamp: `_class_shape.stamp`)
        _compat.out_tree_of([*data[:4], "0" * 64, *data[5:]])
    deep: list = ["t"]
    for _ in range(traces.MAX_TREE_DEPTH + 2):
        deep = ["t", deep]
    with pytest.raises(ValueError):
        _compat.out_tree_of(deep)


def test_captured_jax_arrays_are_keyed_by_content_not_identity():
    """The persisted key's walker keys a JAX array by its values, dtype, shape, weak
    type, committedness and sharding (it once reached the in-process walker's
    dispatch entry, which keys by id); a typed key array and a committed one's
    difference are refused or keyed."""
    import jax
    import jax.numpy as jnp

    from pcache._persist_key import ContentWalker
    from pcache._usercode import NoReuse

    def key(v):
        return ContentWalker().value(v)

    a, b = jnp.arange(3.0), jnp.arange(3.0)
    assert a is not b and key(a) == key(b)
    assert key(a) != key(a + 1.0) and key(a) != key(jnp.arange(4.0))
    assert key(jnp.asarray(1.0)) != key(jnp.asarray(np.float32(1.0)))  # (weak type)
    assert key(a) != key(jax.device_put(a, jax.devices()[0]))  # (committed)
    with pytest.raises(NoReuse):
        key(jax.random.key(0))
    with pytest.raises(NoReuse, match="too-large"):
        key(jnp.zeros(1 << 17))


def test_a_trace_cheaper_than_its_lookup_is_not_stored_and_not_looked_up(tmp_path):
    """The cost policy (`pcache._persist_hints`): a trace that took less than
    ``JAX_PCACHE_TRACE_PERSIST_MIN_GAIN`` times its content key and decode is not
    stored (here every one: a factor of 1000), its callable is remembered in the
    store, and a later process skips those lookups; bitwise stock throughout, and a
    factor of 0 looks every call up and stores every trace again."""
    cache = tmp_path / "c"
    stock = run("patterns", cache=None)
    gain = {"JAX_PCACHE_TRACE_PERSIST_MIN_GAIN": "1000"}
    first = run("patterns", cache=cache, **gain)
    second = run("patterns", cache=cache, **gain)
    assert first["digests"] == second["digests"] == stock["digests"]
    assert first["stats"]["trace_persist_writes"] == 0
    assert first["stats"]["trace_persist_misses"]["unstored:cheaper-to-trace"] > 0
    missed = second["stats"]["trace_persist_misses"]
    assert missed.get("not-stored-before", 0) > 0 and "absent" not in missed, missed
    assert second["stats"]["trace_persist_writes"] == 0
    third = run("patterns", cache=cache)  # (factor 0: the policy off)
    assert third["digests"] == stock["digests"]
    assert third["stats"]["trace_persist_writes"] > 0
    assert "not-stored-before" not in third["stats"]["trace_persist_misses"]


def test_a_callable_whose_trace_is_never_stored_is_not_looked_up_again(tmp_path):
    """A trace refused for what the program is (a host callback here) leaves its
    callable remembered: the next process neither computes its key nor reads."""
    prog = tmp_path / "cb.py"
    prog.write_text(
        "def f(a):\n"
        "    jax.debug.callback(lambda v: None, a)\n"
        "    return a * 2\n"
        "show('cb', lambda: jax.jit(f)(x))\n"
    )
    cache, gain = tmp_path / "c", {"JAX_PCACHE_TRACE_PERSIST_MIN_GAIN": "1"}
    first = run("scenario", str(prog), cache=cache, PHASE="A", **gain)
    second = run("scenario", str(prog), cache=cache, PHASE="B", **gain)
    assert first["digests"]["shown"] == second["digests"]["shown"]
    assert first["stats"]["trace_unrecorded"].get("host-callback", 0) >= 1, first["stats"]
    assert second["stats"]["trace_persist_misses"].get("not-stored-before", 0) >= 1


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork")
def test_the_hints_lock_is_free_in_a_forked_child():
    """A thread holding the stubs' lock (reading the store) when the program forks
    leaves the child a fresh lock (review 109)."""
    from pcache import _persist_hints

    with _persist_hints._LOCK:
        pid = os.fork()
        if pid == 0:  # (the child: its lock must be free)
            os._exit(0 if _persist_hints._LOCK.acquire(timeout=5) else 3)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
