"""The imports user code makes while traced, and the locals they (or a global
chain) bind: what `pcache._usercode`'s scan reads and refuses through them
(review 57: ``import jax`` in the body, ``m = jax.experimental``, ``env =
os.environ``, a relative import). JAX-free."""

from __future__ import annotations

from collections.abc import Callable

from pcache._reflection import (
    _MUTATORS,
    FORMATS,
    REFLECTIVE,
    REFLECTIVE_ATTRS,
    REFLECTIVE_BUILTINS,
    UNGUARDABLE,
)

_ATTR_OPS = frozenset({"LOAD_ATTR", "LOAD_METHOD"})
_CALLS = frozenset({"PRECALL", "CALL", "CALL_FUNCTION", "CALL_FUNCTION_KW"})


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


def sole_binding(ins: list) -> Callable[[int], bool]:
    """Whether the ``STORE_FAST`` at ``ins[j]`` is its local's one binding, read only
    after it: then every read of that local is of what it stores, and a chain read
    through it is the stored chain's (an alias, `import_op`). Else a read before it
    (a loop's next turn), or after another binding of that name on some path, would
    read through it unseen (review 206)."""
    stores: dict[str, int] = {}
    first: dict[str, int] = {}
    for k, x in enumerate(ins):
        if x.opname in ("STORE_FAST", "DELETE_FAST"):
            stores[x.argval] = stores.get(x.argval, 0) + 1
        elif x.opname == "LOAD_FAST":
            first.setdefault(x.argval, k)
    return lambda j: stores[ins[j].argval] == 1 and first.get(ins[j].argval, j) > j


def import_op(ins: list, i: int, reads: dict, alias: dict, sole: Callable) -> str | None:
    """The ``import`` at ``ins[i]``, read (guarded in ``sys.modules``); the local it
    binds remembered, so that what is read through it is guarded as a chain from the
    module. Relative: never reused (review 57: guarded as the absolute). Bound to
    anything but a plain local bound once (a cell nested code reads, a local bound
    again: `sole_binding`): never reused, as what is read through it is not seen
    (review 206)."""
    if i > 1 and ins[i - 2].argval:  # (its level)
        return "relative-import"
    read, n, name = _import_read(ins, i), len(ins), str(ins[i].argval)
    reads[(read, False)] = None
    binds: list = []  # (where the local is bound, what it holds)
    if len(read) == 2 and i + 1 < n and ins[i + 1].opname in _IMPORT_BINDS:
        binds.append((i + 1, ("<imported>", name.partition(".")[0])))
    elif len(read) == 2:  # (``import a.b as c``: c is what ``a`` holds as ``b``)
        k = i + 1
        while k < n and ins[k].opname not in _IMPORT_BINDS and ins[k].opname in _IMPORT_STEPS:
            k += 1
        if k < n and ins[k].opname in _IMPORT_BINDS:
            binds.append((k, ("<imported>", name)))
    else:  # (``from a import b as c``: c is what ``sys.modules["a"]`` holds as ``b``)
        k = i + 1
        while k + 1 < n and ins[k].opname == "IMPORT_FROM":
            binds.append((k + 1, ("<from>", name, ins[k].argval)))
            k += 2
    for k, held in binds:
        if ins[k].opname != "STORE_FAST":
            return "import-into-cell"
        if not sole(k):
            return "import-rebound"
        alias[ins[k].argval] = (k, held)
    return None


# (what binds an import's module: a plain local, or a cell, a global, a class body's)
_IMPORT_BINDS = frozenset({"STORE_FAST", "STORE_DEREF", "STORE_GLOBAL", "STORE_NAME"})


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


# -- writes through locals (review 59) ---------------------------------------------------
# What builds a new container in this frame: a local every binding of which is one of
# these holds nothing anyone else holds (``out = {}``, ``acc = [f(v) for v in vs]``).
_BUILDS = frozenset(
    {
        "BUILD_LIST",
        "BUILD_MAP",
        "BUILD_SET",
        "BUILD_CONST_KEY_MAP",
        "LIST_EXTEND",
        "LIST_APPEND",
        "SET_UPDATE",
        "SET_ADD",
        "DICT_UPDATE",
        "DICT_MERGE",
        "MAP_ADD",
    }
)
_STORES = frozenset({"STORE_FAST", "STORE_DEREF"})


def fresh_locals(c, ins: list, outer: frozenset) -> tuple[frozenset, str | None]:
    """(the locals and own cells of ``c`` that only ever hold a container built in
    this frame, the name of ``self`` where ``c`` is a method): what a write may go
    through. Anything else a local holds (a parameter, a loop or ``with`` target, a
    name unpacked, a global's or a cell's value, a call's result) may be an object
    someone else holds, a library's among them (``for k in (json.JSONEncoder,):
    k.sep = ";"``, ``env, _ = os.environ, 0; env[k] = v``), which no key walks
    again: a write through it is never reused. A ``**kwargs`` dict is this call's own.
    ``self`` of a method is the user's object, walked and checked after the trace."""
    built: dict[str, bool] = {}
    for i, x in enumerate(ins):
        if x.opname in _STORES and x.argval not in outer:
            ok = i > 0 and not x.is_jump_target and _builds(ins, i - 1)
            built[x.argval] = built.get(x.argval, True) and ok
    nargs = c.co_argcount + c.co_kwonlyargcount
    params = set(c.co_varnames[:nargs])
    if c.co_flags & 0x04:  # (CO_VARARGS)
        params.add(c.co_varnames[nargs])
        nargs += 1
    # (an own cell: nested code may rebind it, ``nonlocal d; d = lib_dict``: review 61)
    fresh = {v for v, ok in built.items() if ok and v not in params and v not in c.co_cellvars}
    if c.co_flags & 0x08 and c.co_varnames[nargs] not in built:  # (CO_VARKEYWORDS)
        fresh.add(c.co_varnames[nargs])
    # ``self`` is the object under construction, only in a constructor (a method may
    # be called on any object, ``C.m(lib_obj)``; a staticmethod has none: review 61;
    # an explicit ``__init__`` call on an existing object is refused: `local_write`)
    own = c.co_argcount > 0 and c.co_name in CONSTRUCTING and c.co_varnames[0] not in c.co_cellvars
    if own and any(
        x.opname in ("STORE_FAST", "DELETE_FAST") and x.argval == c.co_varnames[0] for x in ins
    ):
        own = False  # (``for self in targets:``: review 63)
    if not c.co_flags & 0x02:  # (no CO_NEWLOCALS: a class body, whose names are its own)
        return frozenset(), CLASS_BODY
    return frozenset(fresh), c.co_varnames[0] if own else None


CLASS_BODY = "<class body>"  # (`local_write`: every write in a class body refuses)


CONSTRUCTING = frozenset({"__init__", "__post_init__"})


def _builds(ins: list, j: int) -> bool:
    if ins[j].opname in _BUILDS:
        return True
    # a comprehension: its function called on the iterator (``GET_ITER`` then a call
    # of no argument is nothing else)
    return j >= 2 and _call(ins, j, 0) and ins[j - 2].opname == "GET_ITER"


def _call(ins: list, j: int, nargs: int) -> bool:
    """Whether ``ins[j]`` ends a call of ``nargs`` arguments (``PRECALL``, ``CALL``)."""
    x = ins[j]
    return j >= 1 and x.opname == "CALL" and x.arg == nargs and ins[j - 1].opname == "PRECALL"


def _root(ins: list, i: int) -> int:
    """The first instruction of the object expression ending at ``ins[i]``: a load,
    then attributes (``self.cache.log``); ``i`` itself where it is anything else."""
    while i > 0 and ins[i].opname in _ATTR_OPS:
        i -= 1
    return i


def local_write(
    ins: list, i: int, alias: dict, fresh: frozenset, me, outer: frozenset
) -> str | None:
    """Why the instruction at ``ins[i]`` writes where a reuse would not (review 59):
    an attribute store or delete, a container method, an in-place operator or an
    item store through what no key walks again; or None."""
    op, arg = ins[i].opname, ins[i].argval
    if me == CLASS_BODY and (op in _WRITE_OPS or (op in _ATTR_OPS and arg in _MUTATORS)):
        return "writes-in-class-body"  # (``LOAD_NAME`` is the body's own: review 63)
    if op in _ATTR_OPS and arg in _MUTATORS and _branches(ins, _root(ins, i - 1), i):
        return "writes-through-branch"  # ``(G if c else d).update(e)`` (review 63)
    if me is not None and _setter(ins, i, op, arg) and not _on(ins, i + 1, me):
        return "writes-through-setter"  # a constructor's setattr of another object (review 63)
    if op in _ATTR_OPS and arg in CONSTRUCTING and not _super_call(ins, i - 1):
        # ``o.__post_init__()``; but a constructor's on its own object (a dataclass's
        # ``__init__`` calls ``self.__post_init__()``)
        if not (me is not None and i >= 1 and _on(ins, i - 1, me)):
            return "writes-through-constructor"
    if op in ("LOAD_GLOBAL", "LOAD_NAME", "LOAD_DEREF", "LOAD_CLASSDEREF"):
        k = i + 1  # (a chain the scan takes whole: ``C.__post_init__(lib_obj)``, review 63)
        while k < len(ins) and ins[k].opname in _ATTR_OPS:
            if ins[k].argval in CONSTRUCTING:
                return "writes-through-constructor"
            k += 1
    if op in ("STORE_ATTR", "DELETE_ATTR"):
        return write_target(ins, i, fresh, me, outer)
    if op in ("LOAD_FAST", "LOAD_DEREF") and arg not in alias:
        return mutator_target(ins, i, fresh, me, outer)
    if op in _ATTR_OPS and arg in _MUTATORS:
        # on what is not a load with attributes: ``d[k].append(v)``, ``f().update(d)``,
        # ``[D][0].update(d)`` (review 61); but ``super().__init__()``
        r = ins[_root(ins, i - 1)] if i else ins[i]
        if r.opname not in ("LOAD_FAST", "LOAD_DEREF", "LOAD_GLOBAL", "LOAD_NAME"):
            if not (arg == "__init__" and _super_call(ins, i - 1)):
                return f"writes-through-expression:{arg}"
    if op == "LOAD_CONST" and arg in _MUTATORS and _named_getattr(ins, i):
        return f"writes-through-getattr:{arg}"  # ``getattr(reg, "append")(v)``
    if op == "BINARY_OP":
        return inplace_target(ins, i, alias, fresh, me, outer)
    if op in ("STORE_SUBSCR", "DELETE_SUBSCR") and not _local_target(ins, i, fresh):
        return "writes-container"
    return None


_WRITE_OPS = frozenset({"STORE_ATTR", "DELETE_ATTR", "STORE_SUBSCR", "DELETE_SUBSCR", "STORE_NAME"})


def _branches(ins: list, r: int, i: int) -> bool:
    """Whether another path may join the expression ``ins[r + 1 : i + 1]``."""
    return any(x.is_jump_target for x in ins[max(0, r + 1) : i + 1])


def _setter(ins: list, i: int, op: str, arg) -> bool:
    return (op in ("LOAD_GLOBAL", "LOAD_NAME") and arg in ("setattr", "delattr")) or (
        op in _ATTR_OPS and arg in ("__setattr__", "__delattr__")
    )


def _on(ins: list, j: int, me: str) -> bool:
    """Whether the call whose callee ends at ``ins[j - 1]`` is on ``me`` first."""
    return j < len(ins) and ins[j].opname == "LOAD_FAST" and ins[j].argval == me


def _super_call(ins: list, j: int) -> bool:
    """Whether ``ins[j]`` ends ``super()`` (its own ``__init__`` is the object's)."""
    return (
        j >= 2
        and _call(ins, j, 0)
        and ins[j - 2].opname in ("LOAD_GLOBAL", "LOAD_NAME")
        and ins[j - 2].argval == "super"
    )


def own_setter(c, ins: list, i: int) -> bool:
    """Whether the ``setattr``/``delattr`` load or the ``__setattr__``/``__delattr__``
    attribute at ``ins[i]``, in a constructor or an attribute hook (`_CONSTRUCTORS`),
    writes its own object: ``setattr(self, "n", v)``, ``object.__setattr__(self,
    ...)``, ``super().__setattr__(...)``, ``super(cls, self).__setattr__(...)``; not
    ``setattr(self.t, ...)``, ``type.__setattr__(lib_cls, ...)``, nor any in
    ``__new__`` (whose object is a call's result) or where ``self`` is a cell or
    rebound (review 65)."""
    if c.co_argcount < 1 or c.co_name == "__new__":
        return False
    me = c.co_varnames[0]
    if me in c.co_cellvars or any(
        x.opname in ("STORE_FAST", "DELETE_FAST") and x.argval == me for x in ins
    ):
        return False
    if ins[i].opname in _ATTR_OPS and i >= 1 and _super_of(ins, i - 1, me):
        return True
    return (
        i + 2 < len(ins)
        and ins[i + 1].opname == "LOAD_FAST"
        and ins[i + 1].argval == me
        and ins[i + 2].opname not in _ATTR_OPS
    )


def _super_of(ins: list, j: int, me: str) -> bool:
    """Whether ``ins[j]`` ends ``super()`` or ``super(cls, me)``."""
    if _super_call(ins, j):
        return True
    return (
        j >= 4
        and _call(ins, j, 2)
        and ins[j - 2].opname == "LOAD_FAST"
        and ins[j - 2].argval == me
        and ins[j - 3].opname in ("LOAD_GLOBAL", "LOAD_DEREF", "LOAD_FAST", "LOAD_NAME")
        and ins[j - 4].opname in ("LOAD_GLOBAL", "LOAD_NAME")
        and ins[j - 4].argval == "super"
    )


def _named_getattr(ins: list, i: int) -> bool:
    """Whether the string constant at ``ins[i]`` may be a name ``getattr`` is given:
    the code loads ``getattr`` anywhere (an object expression of any length may come
    between them: review 65)."""
    return any(x.opname in ("LOAD_GLOBAL", "LOAD_NAME") and x.argval == "getattr" for x in ins)


def _local_target(ins: list, i: int, fresh: frozenset) -> bool:
    """Whether the container of the ``STORE_SUBSCR`` at ``i`` is a fresh local
    (``d[k] = v`` with ``d`` built in this frame, ``k`` a local or a constant):
    anything else may be a captured, global or library container (``env, _ =
    os.environ, 0``: review 59)."""
    if i < 2 or _branches(ins, i - 3, i):
        return False  # (``(G if c else d)[k] = v``: review 63)
    key, container = ins[i - 1], ins[i - 2]
    plain = container.opname == "LOAD_FAST" and container.argval in fresh
    return key.opname in ("LOAD_FAST", "LOAD_CONST") and plain


def write_target(
    ins: list, i: int, fresh: frozenset, me: str | None, outer: frozenset
) -> str | None:
    """Why the attribute store or delete at ``ins[i]`` is never reused, or None: its
    object must be a fresh local's or ``self``'s (a chain from a global or a free
    variable is the walk's: `pcache._guards`). ``a.n += 1``: the object is the one
    before the ``COPY``."""
    j = i - 1
    if ins[i].opname == "STORE_ATTR" and ins[j].opname == "SWAP":
        while j > 0 and not (ins[j].opname == "COPY" and ins[j + 1].argval == ins[i].argval):
            j -= 1
        j -= 1
    if j < 0:
        return "writes-through-local:?"
    if _branches(ins, _root(ins, j), i):
        return "writes-through-branch"  # ``(A or d).n += 1`` (review 63)
    r = ins[_root(ins, j)]
    if r.opname in ("LOAD_GLOBAL", "LOAD_NAME", "LOAD_CLASSDEREF"):
        return None
    if r.opname == "LOAD_DEREF" and (r.argval in outer or r.argval in fresh):
        return None
    if r.opname == "LOAD_FAST" and r.argval in fresh:
        return None
    if r.opname == "LOAD_FAST" and r.argval == me and ins[j] is r:
        return None  # ``self.n = v`` (not ``self.t.n``: ``self.t`` may be anyone's)
    return f"writes-through-local:{r.argval if 'LOAD' in r.opname else r.opname}"


def mutator_target(
    ins: list, i: int, fresh: frozenset, me: str | None, outer: frozenset
) -> str | None:
    """``v.append(x)``, ``v.log.update(d)`` at ``ins[i]`` (a load of a local): why it
    is never reused (``v`` neither fresh nor ``self``), or None."""
    j = i + 1
    while j < len(ins) and ins[j].opname in _ATTR_OPS:
        j += 1
    if j == i + 1 or ins[j - 1].argval not in _MUTATORS:
        return None
    if ins[i].argval in fresh or ins[i].argval in outer:
        return None  # (a free variable's chain: the walk's)
    return f"writes-through-local:{ins[i].argval}"


def inplace_target(
    ins: list, i: int, alias: dict, fresh: frozenset, me: str | None, outer: frozenset
) -> str | None:
    """``v |= d`` (``BINARY_OP`` in place, then stored to ``v``) at ``ins[i]``: a write
    when ``v`` holds a mutable container (``env = os.environ; env |= {...}``). Never
    reused where ``v`` holds what a global, an import, a free variable, a loop or an
    unpacking bound; a parameter's in-place operator is taken as a rebinding (an
    array's, a number's)."""
    if not ins[i].argrepr.endswith("=") or i + 1 >= len(ins):
        return None
    nxt = ins[i + 1]
    if nxt.opname in ("SWAP", "STORE_SUBSCR", "STORE_ATTR"):
        # ``self.t |= d``, ``d[k] += v``: the old value, anyone's, is changed in place
        # before it is stored back (review 65)
        return "writes-in-place-item"
    if nxt.opname not in _STORES or nxt.argval in fresh or nxt.argval == me:
        return None
    name = nxt.argval
    if name in alias:
        return f"writes-through-alias:{name}"
    if nxt.opname == "STORE_DEREF" and name not in outer:  # (a free one: writes-nonlocal)
        return f"writes-through-cell:{name}"  # (nested code may rebind it: ``nonlocal``)
    for k, x in enumerate(ins):
        if x.opname in _STORES and x.argval == name and k > 0:
            if ins[k - 1].opname not in _OWN_SOURCES or x.is_jump_target:
                return f"writes-through-local:{name}"
    return None


# What a local bound to is its own new object, or a number or an array (an in-place
# operator rebinds it): an operator's or a call's result (a call's: documented), a
# constant, a literal. Anything else (a ``match`` capture, ``x = yield``, a loop, an
# unpacking, a global, an attribute: review 65) may be anyone's object.
_OWN_SOURCES = frozenset(
    {
        "BINARY_OP",
        "CALL",
        "LOAD_CONST",
        "UNARY_NEGATIVE",
        "UNARY_POSITIVE",
        "UNARY_INVERT",
        "UNARY_NOT",
        "COMPARE_OP",
        "CONTAINS_OP",
        "IS_OP",
        "BUILD_STRING",
        "FORMAT_VALUE",
        "LIST_TO_TUPLE",
        "BUILD_TUPLE",
        *_BUILDS,
    }
)
