"""Pytree functions a library generates with ``exec`` (equinox's flatten and
unflatten) are library code when the installed generator makes them again, equal
(`pcache._generated`): a program over such a node is reused; code under the
generator's file name that it does not make, or a name its namespace binds
rebound, is not. Real subprocesses, a fake distribution in a site directory
(the fake lets a test forge its code and rebind its names), results bitwise
stock JAX's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PROG = ROOT / "tests" / "generated_prog.py"

# The fake library: a generator in the shape of equinox 0.13's (this project's own
# code), at the module path pcache recognises.
GENERATOR = """
class _Missing:
    def __bool__(self):
        return False


MISSING = _Missing()
_NS = {"object": object, "MISSING": MISSING}

import jax.tree_util

jax.tree_util.register_pytree_node(_Missing, lambda _: ((), None), lambda _, __: MISSING)


def generate_flatten_functions(cls, fields):
    dynamic = [f.name for f in fields if not f.metadata.get("static")]
    static = [f.name for f in fields if f.metadata.get("static")]
    get = lambda names: "".join(f"get({k!r}, MISSING), " for k in names)
    src = (
        "def flatten(obj):\\n    get = obj.__dict__.get\\n"
        f"    return (({get(dynamic)}), (MISSING, {get(static)}))\\n"
    )
    ns = dict(_NS, module_cls=cls)
    exec(compile(src, f"<generated_flatten_{cls.__qualname__}>", "exec"), ns)
    sets = "".join(
        f"    object.__setattr__(self, {k!r}, data[{i}])\\n" for i, k in enumerate(dynamic)
    ) + "".join(
        f"    object.__setattr__(self, {k!r}, aux[{i}])\\n" for i, k in enumerate(static, 1)
    )
    src = f"def unflatten(module_cls, aux, data):\\n    self = object.__new__(module_cls)\\n{sets}    return self\\n"
    ns2 = dict(_NS)
    exec(compile(src, f"<generated_unflatten_{cls.__qualname__}>", "exec"), ns2)
    return ns["flatten"], None, ns2["unflatten"]
"""


# equinox's Module in miniature: fields set once, while the instance is built.
MODULE = """
WRAPPER_FIELD_NAMES = ("__module__", "__name__", "__qualname__", "__doc__", "__annotations__")


class Module:
    def __setattr__(self, name, value):
        if name in self.__dict__:
            raise AttributeError(f"{name} is frozen")
        object.__setattr__(self, name, value)
"""

# A class renamed after its class statement and stored in another class, as
# optimistix's ``FunctionInfo.EvalGrad``: its dataclass ``__init__`` is generated.
RENAMED = """
import dataclasses
import typing

Y = typing.TypeVar("Y")


class Info:
    pass


@dataclasses.dataclass(frozen=True)
class Grad(Info, typing.Generic[Y]):
    grad: Y


Grad.__qualname__ = "Info.Grad"
Info.Grad = Grad
"""


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("gen") / "site-packages"
    pkg = root / "equinox" / "_module"
    pkg.mkdir(parents=True)
    (root / "equinox" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "_flatten.py").write_text(GENERATOR)
    (pkg / "_module.py").write_text(MODULE)
    (root / "equinox" / "renamed.py").write_text(RENAMED)
    info = root / "equinox-0.13.8.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Name: equinox\nVersion: 0.13.8\n")
    (info / "RECORD").write_text(
        "equinox/__init__.py,,\nequinox/_module/__init__.py,,\nequinox/_module/_flatten.py,,\n"
        "equinox/_module/_module.py,,\nequinox/renamed.py,,\n"
    )
    return root


def run(site: Path, case: str, cache: Path | None) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("JAX_PCACHE_")}
    env["JAX_PLATFORMS"] = "cpu"
    if cache is not None:
        env["JAX_PCACHE_DIR"] = str(cache)
        env["JAX_PCACHE_RAISE_ERRORS"] = "1"
        env["JAX_PCACHE_TRACE_RECORD_AFTER"] = "1"
    proc = subprocess.run(
        [sys.executable, str(PROG), str(site), case],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.splitlines()[-1])


@pytest.mark.parametrize("case", ["proven", "forged", "rebound", "late", "module", "unset"])
def test_generated_pytree_functions_are_library_code_only_as_made(tmp_path, site, case):
    stock = run(site, case, None)
    got = run(site, case, tmp_path / "c")
    assert got["out"] == stock["out"]
    if case == "proven":
        assert got["hits"] == 2, got["why"]
    elif case == "unset":  # a field left to its class default is not the same field set
        assert got["hits"] == 0, got["why"]
    elif case == "module":  # a Module captured: by its fields (a new value traces)
        assert got["hits"] == 1 and got["why"].get("default-changed:<lambda>") == 1, got["why"]
    else:  # walked as user code: its ``obj.__dict__`` is reflection
        assert got["hits"] == 0 and "registry-reflection:__dict__" in got["why"], got["why"]


def test_a_renamed_library_class_is_library_code(site):
    """A library class whose ``__qualname__`` was rewritten after its class statement
    and that another class holds: its generated ``__init__`` is still proven
    library code by the name the module holds it under."""
    code = (
        "import sys; sys.path.insert(0, sys.argv[1])\n"
        "from equinox import renamed\n"
        "from pcache._usercode import is_library_type\n"
        "print(is_library_type(renamed.Info.Grad), is_library_type(renamed.Info))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(site)], cwd=ROOT, capture_output=True, text=True
    )
    assert out.stdout.split() == ["True", "True"], out.stderr[-2000:]
