"""Preloading: a new process loads its previous run's executables on a background thread.

Real subprocesses against a real store; compiles counted through `jax.monitoring`;
results compared bitwise with JAX run without pcache.
"""

from __future__ import annotations

import atexit
import copy
import json
import os
import shutil
import sqlite3
import tempfile
import threading
import time
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from test_jit_cache import run_prog

import pcache
from pcache import _config, store
from pcache._signing import Signer

pytestmark = pytest.mark.timeout(600)

ENV = {"JAX_PCACHE_RAISE_ERRORS": "1"}


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    (row,) = run_prog("preload", str(tmp_path_factory.mktemp("unused")), "--no-pcache")
    return row["digests"]


_COLD: list = []  # (a cold run's cache directory, its row): made once per module


def _cold(root) -> dict:
    """A cold run's cache in ``root``: one cold process per module, its directory
    copied (a cold process compiles every program; no process has the copy open)."""
    if not _COLD:
        made = tempfile.mkdtemp(prefix="pcache-preload-cold-")
        atexit.register(shutil.rmtree, made, True)
        (row,) = run_prog("preload", made, env=ENV)
        _COLD.append((made, row))
    made, row = _COLD[0]
    shutil.copytree(made, root, dirs_exist_ok=True)
    return copy.deepcopy(row)


def _warm(root, **env) -> dict:
    (row,) = run_prog("preload", str(root), env={**ENV, **env})
    return row


def test_warm_process_takes_its_executables_from_the_preload(tmp_path, reference):
    cold = _cold(tmp_path)
    assert cold["digests"] == reference and cold["stats"]["preloaded"] == 0
    n = cold["stats"]["misses"]
    assert n >= 6

    warm = _warm(tmp_path)
    st = warm["stats"]
    assert warm["compiles"] == 0 and warm["digests"] == reference
    assert st["disk_hits"] == n and st["misses"] == 0
    # The first lookup (which starts the preload) loads its own entry; the program
    # then waits for the preload thread, so every other entry is preloaded first.
    assert st["preloaded"] == st["preload_hits"] == n - 1
    assert st["errors"] == 0 and st["bypasses"] == 0

    off = _warm(tmp_path, JAX_PCACHE_PRELOAD="0")
    assert off["compiles"] == 0 and off["digests"] == reference
    assert off["stats"]["preloaded"] == off["stats"]["preload_hits"] == 0
    assert off["stats"]["disk_hits"] == n


def test_lookups_racing_the_preload_thread_stay_correct(tmp_path, reference):
    _cold(tmp_path)
    warm = _warm(tmp_path, PROG_PAUSE="0")
    st = warm["stats"]
    # Lookups race the preload thread: each entry comes from one or the other.
    assert warm["compiles"] == 0 and warm["digests"] == reference
    assert st["preload_hits"] <= st["preloaded"] and st["misses"] == 0
    assert st["errors"] == 0 and st["bypasses"] == 0


def test_exiting_while_the_preload_thread_loads_is_clean(tmp_path, reference):
    _cold(tmp_path)
    for _ in range(3):  # run_prog asserts exit status 0 (no abort, no segfault)
        (row,) = run_prog("exit-early", str(tmp_path), env=ENV)
        assert row["preloaders"] == 1
    warm = _warm(tmp_path)  # and the working set survived the short runs
    assert warm["compiles"] == 0 and warm["digests"] == reference
    assert warm["stats"]["preloaded"] == warm["stats"]["misses"] + warm["stats"]["disk_hits"] - 1


def test_working_set_is_saved_in_first_use_order(tmp_path):
    cold = _cold(tmp_path)
    with store.Store(tmp_path / "store") as s:
        ((name, n, _),) = s.key_sets()
        keys = s.key_set(name)
        stored = {e.key for e in s.entries()}
    assert name.startswith("module tests.progs [cpu/cpu, jax ") and n == len(keys)
    assert set(keys) == stored and len(keys) == cold["stats"]["misses"]
    first, *others = cold["keys"]
    assert keys[0] == first
    positions = [keys.index(k) for k in others]
    assert positions == sorted(positions)  # the program's order


def _entries(db):
    con = sqlite3.connect(db)
    try:
        return con, con.execute("SELECT key, extra, raw_size FROM entries").fetchall()
    except Exception:
        con.close()
        raise


def test_tampered_load_parameters_are_not_preloaded(tmp_path, reference):
    _cold(tmp_path)
    con, rows = _entries(tmp_path / "store" / "store.db")
    with con:
        for key, extra, _ in rows:
            e = json.loads(extra)
            e["load"]["tuple_args"] = not e["load"]["tuple_args"]  # without re-signing
            con.execute("UPDATE entries SET extra = ? WHERE key = ?", (json.dumps(e), key))
    con.close()
    # The head HMAC covers the load parameters: an edited entry is never read, by
    # the preload thread or by a lookup; it is removed and compiled again.
    warm = _warm(tmp_path, JAX_PCACHE_RAISE_ERRORS="0")
    st = warm["stats"]
    assert warm["compiles"] == len(rows) and warm["digests"] == reference
    assert st["preloaded"] == 0 and st["disk_hits"] == 0
    assert st["error_causes"] == {"load entry": len(rows)}
    again = _warm(tmp_path)  # the recompiled entries are sound
    assert again["compiles"] == 0 and again["stats"]["disk_hits"] == len(rows)


def _resign(root, change):
    """Apply ``change(load_params)`` to every entry and sign the result with the
    directory's secret, as pcache itself would."""
    secret = (root / "secret.key").read_bytes()
    con, rows = _entries(root / "store" / "store.db")
    with con:
        for key, extra, raw_size in rows:
            e = json.loads(extra)
            change(e["load"])
            e["head_hmac"] = Signer(secret, root / "secret.key").head(key, raw_size, e["load"])
            con.execute("UPDATE entries SET extra = ? WHERE key = ?", (json.dumps(e), key))
    con.close()
    return len(rows)


def test_a_preload_loaded_differently_than_predicted_is_not_used(tmp_path, reference):
    """Defence in depth: load parameters that pass their HMAC (re-signed with the
    directory's secret) but differ from what the lookup predicts are never used.
    (Only a compiler option is changed: XLA aborts the process when an executable is
    deserialized with, e.g., another tuple_args, which is why the parameters are
    signed at all.)"""
    _cold(tmp_path)
    n = _resign(
        tmp_path, lambda p: p["compiler_options"].append(["xla_embed_ir_in_executable", False])
    )
    warm = _warm(tmp_path)
    st = warm["stats"]
    assert warm["compiles"] == 0 and warm["digests"] == reference
    assert st["preload_hits"] == 0 and st["disk_hits"] == n
    assert st["bypass_reasons"] == {"preload-mismatch": st["preloaded"]} and st["preloaded"] > 0


@pytest.mark.parametrize(
    "change",
    [
        {"platform": "cuda"},
        {"platform_version": "cuda 99"},
        {"jaxlib": "0.0.1"},
        {"device_kinds": ["NVIDIA H100"]},
        {"device_ids": [12345]},
    ],
    ids=lambda c: next(iter(c)),
)
def test_entries_for_another_backend_are_never_deserialized(tmp_path, reference, change):
    """A working set can name entries this backend must not load (the program also
    ran on a GPU, or the directory is shared): XLA may abort the process if asked
    to deserialize them, so the thread checks first and skips them."""
    _cold(tmp_path)
    n = _resign(tmp_path, lambda p: p.update(change))
    warm = _warm(tmp_path)
    st = warm["stats"]
    assert warm["compiles"] == 0 and warm["digests"] == reference
    # Had any been deserialized it would be a preload hit (its load signature is
    # unchanged) or a preload-mismatch bypass: neither happened.
    assert st["preloaded"] == st["preload_hits"] == 0 and st["bypasses"] == 0
    assert st["disk_hits"] == n


# ------------------------------------------------------------------ in-process


def _eventually(cond, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def _the_preloader():
    (pre,) = pcache._api.runtime().preloaded.preloaders.values()
    return pre


def _fill(path, n):
    """n programs compiled into the store at `path`, and the working set saved."""
    x = jnp.ones((32, 32), jnp.float32)
    with pcache.enabled(path, raise_errors=True):
        outs = [jax.jit(lambda a, i=i: jnp.tanh(a * (i + 1.0)) @ a)(x) for i in range(n)]
        jax.block_until_ready(outs)
    return x, [np.asarray(o) for o in outs]


def test_disable_stops_the_preload_thread(tmp_path, monkeypatch):
    from pcache import _preload

    x, expected = _fill(tmp_path, 6)
    gate = threading.Event()
    loading = threading.Event()
    original = _preload.Preloader._load_one

    def slow_load_one(self, digest):
        loading.set()
        gate.wait(10)
        return original(self, digest)

    monkeypatch.setattr(_preload.Preloader, "_load_one", slow_load_one)
    pcache.enable(tmp_path, raise_errors=True)
    try:
        out = jax.jit(lambda a, i=0: jnp.tanh(a * (i + 1.0)) @ a)(x)  # starts the preload
        assert np.array_equal(np.asarray(out), expected[0])
        assert loading.wait(10)
        thread = _the_preloader()._thread
        assert thread.is_alive()
    finally:
        threading.Timer(0.2, gate.set).start()
        pcache.disable()
    assert not thread.is_alive()  # joined by disable(), after the one load in flight


def test_a_lookup_never_hangs_on_the_preload_thread(tmp_path, monkeypatch, caplog):
    from pcache import _preload

    x, expected = _fill(tmp_path, 4)
    gate = threading.Event()
    stuck = []
    original = _preload.Preloader._load_one

    def stuck_load_one(self, digest):
        stuck.append(digest)
        gate.wait(30)  # a load that does not finish while the program runs
        return original(self, digest)

    monkeypatch.setattr(_preload.Preloader, "_load_one", stuck_load_one)
    monkeypatch.setattr(_preload.Preloader, "WAIT_LIMIT", 0.2)
    pcache.enable(tmp_path, raise_errors=True)
    try:
        with caplog.at_level("WARNING", logger="pcache"):
            for i in range(4):  # one of these is the entry stuck in the thread
                out = jax.jit(lambda a, i=i: jnp.tanh(a * (i + 1.0)) @ a)(x)
                assert np.array_equal(np.asarray(out), expected[i])
        assert len(stuck) == 1 and "loading it here instead" in caplog.text
        st = pcache.stats()
        assert st["disk_hits"] == 4 and st["preload_hits"] == 0 and st["compiles"] == 0
    finally:
        gate.set()
        pcache.disable()


def test_preload_budget_is_half_the_memory_tier(tmp_path):
    x, expected = _fill(tmp_path, 8)
    # Each executable counts as its size plus the tier's per-entry overhead: a
    # memory bound of 4 overheads leaves a preload budget of 2 overheads, which
    # one executable fits and two do not.
    bound = 4 * pcache._memory.MemoryTier.ENTRY_OVERHEAD
    pcache.enable(tmp_path, raise_errors=True, max_memory_bytes=bound)
    try:
        jax.jit(lambda a, i=0: jnp.tanh(a * (i + 1.0)) @ a)(x)
        pre = _the_preloader()
        pre._thread.join(10)
        assert pcache.stats()["preloaded"] == 1  # two would exceed it by their sizes
        for i in range(1, 8):
            out = jax.jit(lambda a, i=i: jnp.tanh(a * (i + 1.0)) @ a)(x)
            assert np.array_equal(np.asarray(out), expected[i])
        st = pcache.stats()
        assert st["disk_hits"] == 8 and st["preload_hits"] == st["preloaded"]
    finally:
        pcache.disable()


def test_working_set_is_saved_soon_after_it_grows(tmp_path, monkeypatch):
    from pcache import _preload

    monkeypatch.setattr(_preload.WorkingSets, "SAVE_DELAY", 0.05)
    x = jnp.ones((8, 8), jnp.float32)
    pcache.enable(tmp_path, raise_errors=True)
    try:
        jax.block_until_ready(jax.jit(lambda a: a * 3.0)(x))
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with store.Store(tmp_path / "store") as s:
                sets = s.key_sets()
            if sets:
                break
            time.sleep(0.05)
        assert sets and sets[0][1] == 1  # written while the process still runs
    finally:
        pcache.disable()


def test_preload_setting_is_validated(monkeypatch):
    monkeypatch.setenv("JAX_PCACHE_PRELOAD", "lots")
    with pytest.raises(_config.ConfigError, match="JAX_PCACHE_PRELOAD.*non-negative integer"):
        _config.read_env()
    monkeypatch.setenv("JAX_PCACHE_PRELOAD", "12")
    assert _config.read_env()["preload"] == 12


def test_working_set_saves_do_not_leak_connections(tmp_path, monkeypatch):
    """Each timed save runs on a new thread; its SQLite connection must go with it."""
    from pcache import _preload

    monkeypatch.setattr(_preload.WorkingSets, "SAVE_DELAY", 0.01)
    x = jnp.ones((8, 8), jnp.float32)
    pcache.enable(tmp_path, raise_errors=True)
    try:
        rt = pcache._api.runtime()
        for i in range(25):
            jax.block_until_ready(jax.jit(lambda a, i=i: a * (i + 2.0))(x))
            time.sleep(0.05)  # past the save delay: one save per new key

        def saved_all():
            with store.Store(tmp_path / "store") as s:
                sets = s.key_sets()
            return sets and sets[0][1] == 25

        assert _eventually(saved_all)
        assert _eventually(lambda: len(rt.store._cons) <= 2)  # main's (+ a save in flight)
    finally:
        pcache.disable()


def test_a_short_run_keeps_the_rest_of_the_working_set(tmp_path):
    x, expected = _fill(tmp_path, 5)
    with store.Store(tmp_path / "store") as s:
        (name,) = [n for n, _, _ in s.key_sets()]
        full = s.key_set(name)
    assert len(full) == 5
    with pcache.enabled(tmp_path, raise_errors=True):  # uses only the fourth program
        out = jax.jit(lambda a, i=3: jnp.tanh(a * (i + 1.0)) @ a)(x)
        assert np.array_equal(np.asarray(out), expected[3])
    with store.Store(tmp_path / "store") as s:
        assert s.key_set(name) == [full[3]] + [k for k in full if k != full[3]]


@pytest.mark.filterwarnings("ignore:os.fork:RuntimeWarning")  # the child runs no JAX
def test_a_forked_child_neither_preloads_nor_saves(tmp_path, monkeypatch):
    from pcache import _preload

    monkeypatch.setattr(_preload.WorkingSets, "SAVE_DELAY", 0.01)
    x, _ = _fill(tmp_path, 4)
    with store.Store(tmp_path / "store") as s:
        (name,) = [n for n, _, _ in s.key_sets()]
        before = s.key_set(name)
    pcache.enable(tmp_path, raise_errors=True)
    try:
        rt = pcache._api.runtime()
        pid = os.fork()
        if pid == 0:  # the child: no JAX work after fork, only pcache's bookkeeping
            code = 1
            try:
                ok = not rt.preload_pending(name) and not rt.preload_pending("other")
                rt.preloaded.working_sets.add(name, "f" * 64)
                time.sleep(0.2)  # several save delays
                rt._at_exit()
                code = 0 if ok else 1
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        with store.Store(tmp_path / "store") as s:
            assert s.key_set(name) == before
    finally:
        pcache.disable()


def test_unused_preloads_are_released(tmp_path, monkeypatch):
    from pcache import _preload

    monkeypatch.setattr(_preload.Preloader, "RELEASE_AFTER", 0.05)
    x, expected = _fill(tmp_path, 4)
    pcache.enable(tmp_path, raise_errors=True)
    try:
        jax.jit(lambda a, i=0: jnp.tanh(a * (i + 1.0)) @ a)(x)
        pre = _the_preloader()
        pre._thread.join(10)
        assert pcache.stats()["preloaded"] == 3
        assert _eventually(lambda: all(item.result is None for item in pre._items.values()))
        for i in range(1, 4):  # still served, from the store
            out = jax.jit(lambda a, i=i: jnp.tanh(a * (i + 1.0)) @ a)(x)
            assert np.array_equal(np.asarray(out), expected[i])
        st = pcache.stats()
        assert st["preload_hits"] == 0 and st["disk_hits"] == 4 and st["compiles"] == 0
    finally:
        pcache.disable()


def test_aot_compile_with_options_takes_its_preload(tmp_path):
    """`.compile(compiler_options=...)` is keyed anew at compile time; that key's
    entry is preloaded like any other."""

    def make():  # a new function each time, as in a new process (no JAX trace cache)
        def f(a):
            return jnp.sin(a) @ a

        return f

    x = jnp.ones((16, 16), jnp.float32)
    opts = {"xla_cpu_enable_fast_math": False}
    with pcache.enabled(tmp_path, raise_errors=True):
        expected = np.asarray(jax.jit(make()).lower(x).compile(compiler_options=opts)(x))
    with pcache.enabled(tmp_path, raise_errors=True):
        lowered = jax.jit(make()).lower(x)  # its lookup starts the preload
        _the_preloader()._thread.join(10)
        out = lowered.compile(compiler_options=opts)(x)
        st = pcache.stats()
    assert np.array_equal(np.asarray(out), expected)
    assert st["preload_hits"] == 1 and st["compiles"] == 0


def test_entries_written_under_another_configuration_are_skipped(tmp_path):
    """The key covers the JAX configuration and XLA flags; the preload thread builds
    compile options from the configuration it sees, so it skips entries written
    under another one instead of deserializing them with options they were not
    compiled with."""
    _cold(tmp_path)
    warm = _warm(tmp_path, JAX_DISABLE_MOST_OPTIMIZATIONS="1")
    st = warm["stats"]
    assert warm["compiles"] > 0 and st["disk_hits"] == 0  # other programs, other keys
    assert st["preloaded"] == 0 and st["bypasses"] == 0 and st["errors"] == 0


def _preloaded_in_process(tmp_path, n):
    x, expected = _fill(tmp_path, n)
    pcache.enable(tmp_path, raise_errors=True)
    jax.jit(lambda a, i=0: jnp.tanh(a * (i + 1.0)) @ a)(x)
    pre = _the_preloader()
    pre._thread.join(10)
    assert pcache.stats()["preloaded"] == n - 1
    return pre


def test_clear_memory_and_disable_drop_unused_preloads(tmp_path):
    pre = _preloaded_in_process(tmp_path, 4)
    try:
        pcache.clear_memory()
        assert all(item.result is None for item in pre._items.values())
    finally:
        pcache.disable()
    pre = _preloaded_in_process(tmp_path, 4)
    timer = pre._release_timer
    pcache.disable()
    assert all(item.result is None for item in pre._items.values())
    assert timer.finished.is_set()  # cancelled: it no longer holds the runtime


def test_background_failures_never_raise_even_under_werror(tmp_path, monkeypatch, caplog):
    """A failed working-set save happens on a timer thread or at exit: it is counted
    and logged once, never raised (not even as a warning turned error)."""
    from pcache import _preload

    monkeypatch.setattr(_preload.WorkingSets, "SAVE_DELAY", 0.01)
    escaped = []
    monkeypatch.setattr(threading, "excepthook", lambda args: escaped.append(args))
    x = jnp.ones((8, 8), jnp.float32)
    pcache.enable(tmp_path, raise_errors=True)
    try:
        rt = pcache._api.runtime()

        def broken(*a, **k):
            raise OSError("disk full")

        monkeypatch.setattr(rt.store, "put_key_set", broken)
        with warnings.catch_warnings(), caplog.at_level("WARNING", logger="pcache"):
            warnings.simplefilter("error")
            for i in range(3):
                jax.block_until_ready(jax.jit(lambda a, i=i: a * (i + 5.0))(x))
                time.sleep(0.05)
            assert _eventually(lambda: pcache.stats()["errors"] >= 3)
            rt._at_exit()  # the exit-time save fails the same way
        assert not escaped
        assert caplog.text.count("store write (working set) failed") == 1
        assert pcache.stats()["error_causes"] == {
            "store write (working set)": pcache.stats()["errors"]
        }
    finally:
        monkeypatch.undo()
        pcache.disable()
