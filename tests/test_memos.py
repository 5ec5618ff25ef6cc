"""pcache's in-process memos register themselves where they are made (`_memos`), so
`jax.clear_caches()` and `pcache.clear_memory()` forget every one of them, and no
module keeps a memo outside the registry."""

from __future__ import annotations

import ast
from pathlib import Path

import jax
import jax.numpy as jnp

import pcache
from pcache import _memos, _trace

ROOT = Path(__file__).resolve().parent.parent

# Module-level containers that must outlive a clear, each with its reason.
NOT_MEMOS = {
    ("_state.py", "ORIG"): "the originals of the JAX functions pcache wraps",
    ("_replay.py", "_INITIALIZED"): "initializers already run in this process (never undone)",
    ("_config.py", "_WARNED_UNKNOWN"): "unknown variables already warned about (once)",
    ("_local.py", "_UNTRUSTED_WARNED"): "directories already warned about (once)",
    ("_canon_values.py", "_LOGGED_PRIMS"): "primitives already logged (once)",
    (
        "_canon_values.py",
        "_JAX_PRIMS",
    ): "JAX's own module-level primitives, found by scanning jax.*",
    ("_canon_values.py", "_JAX_PRIMS_SEEN"): "the jax.* modules already scanned",
    (
        "_canon_memo.py",
        "_LOCAL_STRONG",
    ): "process-local tokens: an object keeps its token while alive",
    ("_canon_memo.py", "_LOCAL_IDS"): "weak: process-local tokens of live objects",
    ("_canon_memo.py", "_LOCAL_EQ"): "process-local tokens of values compared by equality",
    ("_canon_values.py", "_STR_CACHE"): "keyed by a string's value: a pure function of it",
    ("_canon_values.py", "_DTYPE_CACHE"): "keyed by a dtype: a pure function of it",
    ("_canon_values.py", "_DEFAULT_EXTRAS"): "keyed by ndim: a pure function of it",
    ("_guards.py", "_PY_BUILTINS"): "Python's builtins as they were at import",
    ("_trace.py", "RECORDED"): "weak: the jaxprs of live recorded traces",
    ("_trace.py", "_LOWERING_WARNINGS"): "weak: keyed by the jaxprs of live recorded traces",
    ("_trace.py", "_FN_STATE"): "cleared with JAX's caches by trace.function_states",
    ("_trace.py", "_MUTATED"): "cleared with JAX's caches by trace.function_states",
    ("_usercode.py", "_LIBRARY"): "what is library code: a fact about loaded modules",
    ("_usercode.py", "_LIBRARY_TYPES"): "weak: what is a library class",
    ("_usercode.py", "_CODE"): "a code object's verdict: a pure function of the code",
    (
        "_usercode.py",
        "_CODE_FILES",
    ): "whether a code object is one its library module's file defines",
    ("_walk.py", "_ARRAY_OWN"): "the attributes JAX's array types keep: facts filled at import",
    ("_usercode.py", "_FILES"): "whether a file name (by its real path) is a library file",
    ("_jit_handoff.py", "_PENDING"): "weak: lowerings in flight",
    ("_memos.py", "_FORKED"): "weak: the objects reset in a forked child",
}

_MEMO_TYPES = {
    "dict",
    "set",
    "WeakKeyDictionary",
    "WeakValueDictionary",
    "WeakSet",
    "BoundedMemo",
    "IdMemo",
    "TraceMemo",
    "OrderedDict",
    "defaultdict",
}


def _made_empty(v: ast.expr) -> bool:
    """A container made empty at import, to be filled at run time: a memo (a table
    of constants is made full)."""
    if isinstance(v, ast.Dict):
        return not v.keys
    if isinstance(v, ast.Call):
        f = v.func
        name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
        return name in _MEMO_TYPES and not (name in ("dict", "set") and v.args)
    return False


def test_no_memo_outside_the_registry() -> None:
    found = []
    for path in sorted((ROOT / "pcache").glob("*.py")):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for t in targets:
                    if (
                        isinstance(t, ast.Name)
                        and _made_empty(node.value)
                        and (path.name, t.id) not in NOT_MEMOS
                    ):
                        found.append(f"{path.name}:{t.id}")
    assert not found, f"module-level memos not registered with _memos.memo: {found}"


def test_clear_caches_and_clear_memory_empty_every_registered_memo(tmp_path) -> None:
    pcache.enable(tmp_path / "c")
    try:
        x = jnp.arange(4.0)
        for _ in range(3):
            jax.jit(jax.grad(lambda v: jnp.sum(jnp.sin(v) * 2.0)))(x)
            jax.jit(lambda v: (v * 3.0, {"a": [v]}))(x)
        assert len(_trace.MEMO) > 0
        assert any(len(m) for _, m in _memos.registered())
        jax.clear_caches()
        assert {n: len(m) for n, m in _memos.registered() if len(m)} == {}
        jax.jit(lambda v: v + 1.0)(x)
        pcache.clear_memory()
        assert {n: len(m) for n, m in _memos.registered() if len(m)} == {}
        names = [n for n, _ in _memos.registered()]
        for want in ("trace.memo", "jit_seam.computations", "canon.jaxprs", "key.context"):
            assert want in names
    finally:
        pcache.disable()
