"""The imports user code makes while traced, and the locals they (or a global
chain) bind: what `pcache._usercode`'s scan reads and refuses through them
(review 57: ``import jax`` in the body, ``m = jax.experimental``, ``env =
os.environ``, a relative import). JAX-free."""

from __future__ import annotations

from pcache._reflection import (
    FORMATS,
    REFLECTIVE,
    REFLECTIVE_ATTRS,
    REFLECTIVE_BUILTINS,
    UNGUARDABLE,
)

_ATTR_OPS = frozenset({"LOAD_ATTR", "LOAD_METHOD"})
_CALLS = frozenset({"PRECALL", "CALL", "CALL_FUNCTION", "CALL_FUNCTION_KW"})
_MUTATORS = frozenset(
    {
        "append",
        "extend",
        "insert",
        "pop",
        "popitem",
        "clear",
        "update",
        "add",
        "remove",
        "discard",
        "setdefault",
        "sort",
        "reverse",
        "__setitem__",
        "__delitem__",
        "__iadd__",
        "difference_update",
        "intersection_update",
        "symmetric_difference_update",
    }
)


def _constant_attr_call(ins: list, i: int) -> bool:
    """Whether the builtin loaded at ``i`` is called as ``getattr(x, "name"[, d])``:
    one plain load (with attributes) for the object, then a string constant (and a
    plain default), then the call."""
    j = i + 1
    n = len(ins)
    if j >= n or ins[j].opname not in ("LOAD_FAST", "LOAD_DEREF", "LOAD_GLOBAL", "LOAD_NAME"):
        return False
    j += 1
    while j < n and ins[j].opname in _ATTR_OPS:
        j += 1
    if j >= n or ins[j].opname != "LOAD_CONST" or type(ins[j].argval) is not str:
        return False
    name = ins[j].argval  # what ``.name`` may not read, ``getattr(x, "name")`` may not
    if name in REFLECTIVE_ATTRS or name in FORMATS or name in REFLECTIVE_BUILTINS:
        return False  # (review 28: getattr(e, "__context__"), getattr(s, "format"))
    j += 1
    if j < n and ins[j].opname in ("LOAD_CONST", "LOAD_FAST", "LOAD_GLOBAL"):
        j += 1  # a default
    return j < n and ins[j].opname in _CALLS


_IMPORT_STEPS = frozenset({"IMPORT_FROM", "SWAP", "POP_TOP", "ROT_TWO", "COPY"})


def local(ins: list, i: int, alias: dict, reads: dict, why: str | None) -> tuple:
    """A local `import_op` or a global chain bound: rebound (forgotten), or read."""
    if ins[i].opname == "STORE_FAST":
        if alias[ins[i].argval][0] != i:
            del alias[ins[i].argval]
        return i, why
    why = why or _alias_use(ins, i, alias[ins[i].argval][1], reads)
    while i + 1 < len(ins) and ins[i + 1].opname in _ATTR_OPS:
        i += 1  # (its chain: read)
    return i, why


def import_op(ins: list, i: int, reads: dict, alias: dict) -> str | None:
    """The ``import`` at ``ins[i]``, read (guarded in ``sys.modules``); the local it
    binds remembered. Relative: never reused (review 57: guarded as the absolute)."""
    if i > 1 and ins[i - 2].argval:  # (its level)
        return "relative-import"
    read, n, name = _import_read(ins, i), len(ins), str(ins[i].argval)
    reads[(read, False)] = None
    if i + 1 < n and ins[i + 1].opname == "STORE_FAST" and len(read) == 2:
        alias[ins[i + 1].argval] = (i + 1, ("<imported>", name.partition(".")[0]))
    elif len(read) == 2:  # (``import a.b as c``: c is a.b)
        k = i + 1
        while k < n and ins[k].opname != "STORE_FAST" and ins[k].opname in _IMPORT_STEPS:
            k += 1
        if k < n and ins[k].opname == "STORE_FAST":
            alias[ins[k].argval] = (k, ("<imported>", name))
    return None


def _alias_use(ins: list, i: int, held: tuple, reads: dict) -> str | None:
    """A local holding an imported module or a global's value (``import jax``, ``m =
    jax.experimental``, ``env = os.environ``) read at ``ins[i]``: a write through it
    refuses; a read continues its chain (guarded as the global's or module's)."""
    n, chain = len(ins), list(held)
    j = i + 1
    while j < n and ins[j].opname in _ATTR_OPS:
        chain.append(ins[j].argval)
        j += 1
    nxt = ins[j].opname if j < n else "RETURN_VALUE"
    name = ins[i].argval
    if nxt in ("STORE_ATTR", "DELETE_ATTR") or (
        nxt == "COPY" and j + 1 < n and ins[j + 1].opname in _ATTR_OPS
    ):
        return f"writes-through-alias:{name}"
    if len(chain) > len(held) and chain[-1] in _MUTATORS:
        return f"writes-through-alias:{name}"
    if nxt == "LOAD_CONST" and _constant_attr_call(ins, i - 1):
        chain.append(ins[j].argval)  # ``hasattr(m.sub, "name")``
    for attr in chain[len(held) :]:
        if attr in REFLECTIVE or attr in UNGUARDABLE or attr in REFLECTIVE_ATTRS:
            return f"reflection:{attr}"
    reads[(tuple(chain[1:] if chain[0] == "<global>" else chain), True)] = None
    return None


def _import_read(ins: list, i: int) -> tuple:
    """``import a.b`` / ``from a import n, m`` at ``ins[i]``: the module, and the
    names taken from it."""
    froms: list = []
    if i > 0 and ins[i - 1].opname == "LOAD_CONST" and ins[i - 1].argval is None:
        # ``import a.b as c``: IMPORT_FROMs walk down the dotted name itself
        return ("<import>", ins[i].argval)
    j = i + 1
    while j < len(ins) and ins[j].opname in _IMPORT_OPS:
        if ins[j].opname == "IMPORT_FROM":
            froms.append(ins[j].argval)
        j += 1
    return ("<import>", ins[i].argval, *froms)


_IMPORT_OPS = frozenset({"IMPORT_FROM", "STORE_FAST", "STORE_NAME", "STORE_DEREF", "STORE_GLOBAL"})
