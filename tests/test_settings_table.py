"""Settings are data: one table (`pcache._config.OPTIONS`) from which the environment
reader, `pcache.enable`'s keywords, ``pcache env`` and the CLI's help are derived, so
adding a setting is one row. Each reader is checked against every row here, and no
other module reads a ``JAX_PCACHE_*`` variable itself."""

from __future__ import annotations

import ast
import inspect
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

import pcache
from pcache import _config
from pcache._config import OPTIONS, ConfigError, Settings
from pcache.cli import cli

ROOT = Path(__file__).resolve().parent.parent

# A sample variable text per parser, and the value it must give.
SAMPLES = {
    _config.parse_size: ("3MiB", 3 * 1024**2),
    _config.parse_age: ("90s", 90.0),
    _config.parse_count: ("12", 12),
    _config.parse_positive: ("3", 3),
    _config.parse_flag: ("yes", True),
    os.fspath: ("/some/key", "/some/key"),
    _config.parse_names: (" PHASE, SLURM_* ", ("PHASE", "SLURM_*")),
    _config.parse_gain: ("0.5", 0.5),
}


def _sample(o: _config.Option):
    if o.parse in SAMPLES:
        return SAMPLES[o.parse]
    if o.name == "remote":
        return "redis://localhost:6379/0", "redis://localhost:6379/0"
    if o.name == "remote_namespace":
        return " fleet-a ", "fleet-a"
    if o.name == "path":
        return "/tmp/somewhere", Path("/tmp/somewhere")
    raise AssertionError(f"no sample for {o.name}: add one")


def _value(s: Settings, o: _config.Option):
    if o.name == "remote":
        return s.remote.url
    if o.group == "remote":
        field = o.name.removeprefix("remote_")
        return getattr(s.remote, field)
    return s.path if o.name == "path" else getattr(s, o.name)


@pytest.mark.parametrize("o", OPTIONS, ids=lambda o: o.name)
def test_every_row_is_read_from_its_variable_and_as_a_keyword(o, tmp_path) -> None:
    text, want = _sample(o)
    env = {o.env: text}
    if o.group == "remote":
        env["JAX_PCACHE_REMOTE"] = "redis://localhost:6379/0"
    assert _config.read_env(env)[o.name] == want
    s = Settings.resolve(None if o.name == "path" else tmp_path, environ=env)
    assert _value(s, o) == want
    if o.keyword and o.name != "path":
        assert o.name in inspect.signature(pcache.enable).parameters
        assert o.name in pcache.enable.__doc__ and o.env in pcache.enable.__doc__
        extra = {"remote": "redis://localhost:6379/0"} if o.group == "remote" else {}
        s = Settings.resolve(tmp_path, environ={}, **{o.name: text, **extra})
        assert _value(s, o) == want  # an argument is parsed as its variable is
        assert _value(Settings.resolve(tmp_path, environ=env, **extra), o) == want
    if o.parse is not os.fspath and o.name not in ("path", "remote_namespace"):
        with pytest.raises(ConfigError, match=o.env):
            _config.read_env({o.env: "not-a-value-%%"})


def test_pcache_env_and_help_list_every_row(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("JAX_PCACHE_DIR", str(tmp_path))
    env_out = CliRunner().invoke(cli, ["env"]).output
    help_out = CliRunner().invoke(cli, ["--help"]).output
    for o in OPTIONS:
        assert o.env in env_out and o.help in env_out
        assert o.env in help_out


def test_an_unknown_keyword_names_the_closest_setting(tmp_path) -> None:
    with pytest.raises(TypeError, match="did you mean 'max_disk_bytes'"):
        pcache.enable(tmp_path, max_disk="1GB")


def test_defaults_and_none(tmp_path) -> None:
    s = Settings.resolve(tmp_path, environ={})
    for o in OPTIONS:
        if o.name != "path" and not o.group:
            assert getattr(s, o.name) == o.default
    assert s.remote is None
    s = Settings.resolve(tmp_path, max_disk_bytes=None, max_memory_bytes=None, environ={})
    assert s.max_disk_bytes is None and s.max_memory_bytes == _config.UNBOUNDED
    # an argument wins over its variable, which wins over the default
    env = {"JAX_PCACHE_PRELOAD": "5"}
    assert Settings.resolve(tmp_path, environ=env).preload == 5
    assert Settings.resolve(tmp_path, preload=0, environ=env).preload == 0


def test_no_module_reads_a_pcache_variable_but_the_table() -> None:
    """``os.environ[...]``/``.get(...)``/``os.getenv(...)`` of a ``JAX_PCACHE_*`` name
    anywhere but `pcache._config` would be a setting outside the table. The plugin
    looks at ``JAX_PCACHE_DIR`` before importing anything (JAX starts it in every
    process)."""
    allowed = {
        "_plugin.py: os.environ.get('JAX_PCACHE_DIR')",
        "_cli_remote.py: os.environ.get('JAX_PCACHE_REMOTE_TIMEOUT')",  # moves to the table next
    }
    found = []
    for path in [*(ROOT / "pcache").rglob("*.py"), *(ROOT / "store").rglob("*.py")]:
        if path.name == "_config.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                continue
            args = []
            if isinstance(node, ast.Call):
                args = node.args[:1]
            elif isinstance(node, ast.Subscript):
                args = [node.slice]
            for a in args:
                if isinstance(a, ast.Constant) and str(a.value).startswith("JAX_PCACHE_"):
                    src = ast.unparse(node)
                    if "environ" in src or "getenv" in src:
                        found.append(f"{path.name}: {src}")
    assert set(found) <= allowed, found
