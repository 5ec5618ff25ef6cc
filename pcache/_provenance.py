"""Whether a code object is one a library file defines: proven, not claimed.

A function's ``co_filename`` is a string its maker chose (``compile(src,
"/usr/lib/python3.11/collections/__init__.py", "exec")``, or ``"<string>"``), and
``types.FunctionType(code, vars(collections))`` gives user code a library module's
globals (review 44). So library code is proven by content: a code object is library
code when its file is its module's own file and the file's compiled form (the
bytecode cache the import system reads, else the source compiled again; a frozen
module's: the interpreter's frozen code) holds an equal code object at the same line under the same name; code objects compare
every field that decides what they do (bytecode, constants, names, flags, argument
layout, line and exception tables). Code a library generates at run time
(``"<string>"``: dataclasses' methods) is library code when it is the code of a
method of a class the library module itself holds.

A file is read once per process (memoized by name, bounded); a file changed since
its module was imported no longer proves its old code: that code is then user code,
walked and guarded (fail closed).
"""

from __future__ import annotations

import _imp
import dis
import importlib.util
import inspect
import marshal
import os
import re
import sys
import types
from importlib.machinery import EXTENSION_SUFFIXES
from typing import Any

from pcache._bytecode import named_by, ops
from pcache._introspect import cdict, is_a, items, names
from pcache._memos import collector_paused, memo

_CODE = types.CodeType
_CLASSES = "classes"  # (an index's entry: the qualified names of its class statements)
# file name -> {(first line, name): [code objects]} of its compiled form
_COMPILED: dict[str, dict] = memo("provenance.compiled", {})
# id(module namespace) -> (namespace, its size, its classes' generated code by id)
_GENERATED: dict[int, tuple] = memo("provenance.generated", {})
_REAL_DIRS: dict[str, str] = memo("provenance.real_dirs", {})  # directory -> its realpath
_REBINDS: dict[tuple, bool] = memo("provenance.rebinds", {})  # (file, global) -> rebound
_FACTS: dict[str, tuple] = memo("provenance.facts", {})  # file -> `_facts`


def real_path(path: str) -> str:
    """``os.path.realpath(path)`` with the directory resolved once per process (a
    module file's directory: ~10 ``lstat`` calls each time otherwise; links are taken
    as fixed while the program runs, as the verdicts kept per file name are); the
    file itself is checked for a link every time."""
    d, base = os.path.split(path)
    if not os.path.isabs(path) or base in ("", ".", ".."):
        return os.path.realpath(path)
    rd = _REAL_DIRS.get(d)
    if rd is None:
        if len(_REAL_DIRS) > 4096:
            _REAL_DIRS.clear()
        rd = _REAL_DIRS[d] = os.path.realpath(d)
    full = os.path.join(rd, base)
    return os.path.realpath(full) if os.path.islink(full) else full


def defined_by(g: dict, code: _CODE, library_file) -> bool:
    """Whether ``code`` is code that library module namespace ``g``'s own file
    defines (or that the library generated for a class ``g`` holds)."""
    f = code.co_filename
    if f == "<string>":
        return _generated(g).get(id(code)) is code
    mf, name = g.get("__file__"), g.get("__name__")
    if type(name) is str and f == f"<frozen {name}>" and _imp.is_frozen(name):
        got = _compiled(f, name)  # a module the interpreter holds frozen (os, codecs)
    elif type(f) is not str or type(mf) is not str or not library_file(f):
        return False
    elif f != mf and real_path(f) != real_path(mf):
        return False
    else:
        got = _compiled(f)
    return any(c == code for c in got.get((code.co_firstlineno, code.co_name), ()))


def codes_named(file: str, qual: str) -> list:
    """The code objects of qualified name ``qual`` that ``file``'s compiled form
    defines (`pcache._lib_callbacks`: a library's callback rebuilt)."""
    return [
        c
        for k, cs in _compiled(file).items()
        if k != _CLASSES
        for c in cs
        if getattr(c, "co_qualname", None) == qual
    ]


def rebinds_global(file: str, name: str) -> bool:
    """Whether a function ``file`` defines may assign or delete its module's global
    ``name`` while the program runs, so the object that name holds may change
    (`pcache._out_tree`: a library object named by it, reviews 123 and 124): ``global
    X; X = ...``, an attribute of that name set or deleted on anything (``sys.
    modules[__name__].X = ...``, or another module's), or, in a function that loads
    ``globals``, ``vars``, ``setattr``, ``exec``, ``__dict__`` and the like, a string
    constant that is the name (``globals()["X"] = ...``, ``setattr(m, "X", ...)``,
    ``vars(m).update(X=...)``) or source text assigning it (``exec("X = ...")``; not
    one that only reads it: equinox generates its flatten functions so). Memoized
    per file and name."""
    key = (file, name)
    got = _REBINDS.get(key)
    if got is None:
        stored, escaped, strings, _ = _facts(file)
        got = name in stored or name in escaped or _UNREAD in stored
        if not got and strings:
            n = re.escape(name)  # (as a string, or assigned in source text for ``exec``)
            word = re.compile(
                rf"^{n}$|(?<![A-Za-z0-9_.]){n}\s*(?:,[^=\n]*)?(?:=(?!=)|:=)|\bdel\s+{n}\b"
                rf"|\bglobal\b[^\n]*\b{n}\b"
            )
            got = any(word.search(s) for s in strings)
        if len(_REBINDS) > 4096:
            _REBINDS.clear()
        _REBINDS[key] = got
    return got


def stores_global(file: str, name: str) -> bool:
    """`rebinds_global` by what the code visibly stores (``global X; X = ...``,
    ``anything.X = ...``, a writer passed on at import, the name as a string in a
    function that calls ``globals``, ``setattr`` and the like itself: review 173), not
    by strings a helper that writes namespaces may be handed: a class is named so
    (`pcache._persist_key`), as such strings are how a library names its classes in
    code it generates (``dataclasses`` names ``FrozenInstanceError``)."""
    stored, escaped, _, direct = _facts(file)
    return name in stored or name in escaped or name in direct or _UNREAD in stored


def _facts(file: str) -> tuple:
    """What `rebinds_global` asks of ``file``, read once for all its names: the names
    its code stores or deletes as a global or an attribute; the strings its module
    body loads in a statement passing a namespace writer on (`_escaping_writer`); the
    string constants of its functions that write a namespace by name."""
    got = _FACTS.get(file)
    if got is None:
        codes = [c for k, cs in _compiled(file).items() if k != _CLASSES for c in cs]
        dynamic = _DYNAMIC | _aliases(codes)
        # (code that cannot be read may rebind anything; a C extension's has none)
        unread = not codes and not file.endswith(tuple(EXTENSION_SUFFIXES))
        stored: set = {_UNREAD} if unread else set()
        escaped: set = set()
        strings: list = []
        direct: set = set()
        once = _at_import(codes)
        # (the module's names for a namespace, not its helpers that write one: a string
        # handed to ``dataclasses._create_fn`` names a class, it rebinds nothing)
        values = dynamic - _DYNAMIC - {c.co_name for c in codes if _DYNAMIC & set(c.co_names)}
        # (but a helper that hands the namespace back is one: ``_ns()["X"] = ...``)
        values |= {
            c.co_name
            for c in codes
            if c.co_name != "<module>" and _NAMESPACES & set(c.co_names) and _returns_namespace(c)
        }
        for c in codes:
            if id(c) in once:  # (runs once, at import: what it binds is in the import's
                # copy; not a writer it passes on, ``__all__``, ``partial(setattr, ...)``)
                escaped |= _escaping_writer(c, _WRITERS | dynamic)
                continue
            stored.update(named_by(c, _STORE_OPS))
            names, consts = _unit(c)  # (with its comprehensions and lambdas: review 175)
            if dynamic.intersection(names) or c.co_name in dynamic:
                strings += _strings(consts)
            if (_DYNAMIC | values).intersection(names):  # (a writer it calls itself, or
                # the module's alias of a namespace, ``_G = globals()``: review 175)
                direct.update(x for x in _strings(consts) if x.isidentifier())
        if len(_FACTS) > 1024:
            _FACTS.clear()
        got = _FACTS[file] = (frozenset(stored), frozenset(escaped), tuple(strings),
                              frozenset(direct))  # fmt: skip
    return got


_UNREAD = "<unread>"  # (in a file's stored names: its code could not be read)


def _at_import(codes: list) -> set:
    """The ids of the bodies that run once, as the module is imported: the module's,
    and the class bodies only class bodies hold from it (optimistix's ``FunctionInfo.
    Eval = Eval``); not a class statement in a function, run at each call (review 171)."""
    todo = [c for c in codes if c.co_name == "<module>" and not c.co_flags & inspect.CO_NEWLOCALS]
    out: set = set()
    while todo:
        c = todo.pop()
        out.add(id(c))
        todo += [
            k for k in c.co_consts if type(k) is _CODE and not k.co_flags & inspect.CO_NEWLOCALS
        ]
    return out


def _unit(c: _CODE) -> tuple[set, tuple]:
    """The names and constants of ``c`` with those of the code objects it holds (a
    comprehension, a lambda: in 3.11 each its own code object, the writer in one and
    the name in the other)."""
    names, consts, todo = set(), [], [c]
    while todo:
        k = todo.pop()
        names.update(k.co_names)
        consts += k.co_consts
        todo += [x for x in k.co_consts if type(x) is _CODE]
    return names, tuple(consts)


def _escaping_writer(c: _CODE, writers: frozenset) -> set:
    """The strings body ``c`` loads in a statement that passes a namespace writer on
    (not calls it: that runs at import): a callable it makes may write that name
    later, ``use = partial(setattr, H, "CUR")`` (review 147); a writer as the module's
    alias of one (``_set = setattr``) or read as an attribute (``builtins.setattr``,
    ``type.__setattr__``, ``OBJ.__dict__.__setitem__``: review 148, where a call at
    import is not told apart: counted too)."""
    out: set = set()
    if not _mentions(c, writers | _NAMESPACES):  # (nothing below can start: not read)
        return out
    escaped, dyn, prev = False, False, None
    for op, arg, val in ops(c):
        if op in ("STORE_NAME", "STORE_GLOBAL", "POP_TOP", "RETURN_VALUE"):
            escaped = dyn = False  # (a statement's end)
        elif op in ("LOAD_NAME", "LOAD_GLOBAL") and val in writers:
            escaped = escaped or prev != "PUSH_NULL"
            dyn = dyn or val in _NAMESPACES
        elif op == "LOAD_ATTR" and (val in writers or dyn and val in _UPDATERS):
            escaped = True  # (``partial(globals().update, Mode=...)``: review 176)
        elif escaped and op == "LOAD_CONST" and type(val) is str:
            out.add(val)
        elif escaped and op == "KW_NAMES":  # (a keyword's name: ``Mode=``)
            out.update(x for x in c.co_consts[arg] if type(x) is str)
        if op in ("LOAD_NAME", "LOAD_GLOBAL", "LOAD_ATTR") and val in _NAMESPACES:
            dyn = True
        prev = op
    return out


#: What reads a namespace as a dict (a module body's ``locals()`` is its globals),
#: and the dict methods that write one by a name they are handed.
_NAMESPACES = frozenset({"globals", "vars", "locals", "__dict__", "modules", "f_globals"})
_UPDATERS = frozenset({"update", "setdefault"})


_WRITERS = frozenset({"setattr", "delattr", "__setattr__", "__delattr__", "__setitem__",
                      "setitem", "delitem"})  # fmt: skip


def _aliases(codes: list) -> frozenset:
    """The names that may stand for a namespace written by name: every name the
    module's body binds in a statement that loads one (``_G = globals()``, ``_G = _NS =
    globals()``, ``_X, _H = 1, globals()``, ``_M = sys.modules[__name__]``, a function
    whose default is one: reviews 126, 127), and every function that loads one itself
    (a helper returning ``globals()``): a function that loads such a name writes by a
    string like one that calls ``globals()``."""
    out = {c.co_name for c in codes if c.co_name != "<module>" and _DYNAMIC & set(c.co_names)}
    for c in codes:
        if c.co_name != "<module>" or not _mentions(c, _DYNAMIC | _NAMESPACES):
            continue
        pending, storing = False, False  # (a statement ends with what it stores: its
        for op, _, val in ops(c):  # lines may not, ``_G = (\n globals()\n)``)
            if op in ("STORE_NAME", "STORE_GLOBAL"):
                if pending and type(val) is str:
                    out.add(val)
                storing = True
                continue
            if storing and op not in ("COPY", "SWAP", "UNPACK_SEQUENCE", "UNPACK_EX"):
                pending = False
            storing = False
            if op == "POP_TOP":
                pending = False
            elif val in _DYNAMIC or val in _NAMESPACES:  # (a module's
                pending = True  # ``locals()`` is its globals: review 176)
    return frozenset(out)


def _mentions(c: _CODE, names: frozenset) -> bool:
    """Whether ``c``'s own instructions may have one of ``names`` as their argument:
    a name they load or store, or a string constant (the reads above test nothing
    else; most module bodies mention none, and ``dis`` is slow over them)."""
    return not names.isdisjoint(c.co_names) or any(
        type(k) is str and k in names for k in c.co_consts
    )


def _returns_namespace(c: _CODE) -> bool:
    """Whether function code ``c`` returns what a namespace reader just gave it
    (``return globals()``, ``return sys.modules[__name__].__dict__``: review 176)."""
    last = -99
    for i, (op, _, val) in enumerate(ops(c)):
        if op in ("LOAD_GLOBAL", "LOAD_NAME", "LOAD_ATTR") and val in _NAMESPACES:
            last = i
        elif op == "RETURN_VALUE" and i - last <= 6:
            return True
    return False


def _strings(consts: tuple) -> list:
    out: list = []
    for k in consts:
        if type(k) is str:
            out.append(k)
        elif type(k) in (tuple, frozenset):
            out += _strings(tuple(k))
    return out


_STORES = frozenset({"STORE_GLOBAL", "DELETE_GLOBAL", "STORE_ATTR", "DELETE_ATTR"})
_STORE_OPS = frozenset(dis.opmap[n] for n in _STORES)
#: Names a function that writes a namespace by a string loads.
_DYNAMIC = frozenset({"globals", "vars", "setattr", "delattr", "exec", "eval", "__dict__",
                      "__setattr__", "__delattr__", "f_globals", "__globals__"})  # fmt: skip


def class_body(file: str, qual: str) -> bool:
    """Whether a class statement of ``file`` defines the qualified name ``qual``."""
    return qual in _compiled(file).get(_CLASSES, ())


def _compiled(file: str, frozen: str | None = None) -> dict:
    got = _COMPILED.get(file)
    if got is None:
        if len(_COMPILED) > 4096:
            _COMPILED.clear()
        with collector_paused():  # (a file's code objects: `_memos.collector_paused`)
            got = _COMPILED[file] = _index(_frozen(frozen) if frozen else _load(file))
    return got


def _frozen(name: str) -> _CODE | None:
    try:
        code = _imp.get_frozen_object(name)
    except ImportError:
        return None
    return code if type(code) is _CODE else None


def _load(file: str) -> _CODE | None:
    """The module code of ``file`` as the import system would load it: its
    bytecode cache when there is one that the source's size and modification time
    (or hash) say is current, else its source compiled."""
    try:
        with open(file, "rb") as fh:
            data = fh.read()
    except OSError:
        return None
    if file.endswith(".pyc"):  # (a sourceless module: its bytecode is what ran)
        try:
            code = marshal.loads(memoryview(data)[16:])
        except (ValueError, EOFError, TypeError):
            return None
        ok = data[:4] == importlib.util.MAGIC_NUMBER and type(code) is _CODE
        return code if ok else None
    try:
        with open(importlib.util.cache_from_source(file), "rb") as fh:
            cached = fh.read()
        if _current(cached, file, data):
            code = marshal.loads(memoryview(cached)[16:])  # (after the header)
            if type(code) is _CODE:
                return code
    except (OSError, ValueError, EOFError, TypeError, NotImplementedError):
        pass
    try:
        src = importlib.util.decode_source(data)
        return compile(src, file, "exec", dont_inherit=True, optimize=sys.flags.optimize)
    except (SyntaxError, ValueError, UnicodeDecodeError):
        return None


def _current(cached: bytes, file: str, source: bytes) -> bool:
    """Whether bytecode cache ``cached`` is of this interpreter and of ``source`` as
    the import system checks it (PEP 552: its source's modification time and size,
    or its hash): a stale one is what the program does not run."""
    if len(cached) < 16 or cached[:4] != importlib.util.MAGIC_NUMBER:
        return False
    flags = int.from_bytes(cached[4:8], "little")
    if flags & 1:  # (hash-based)
        return cached[8:16] == importlib.util.source_hash(source)
    st = os.stat(file)
    return (
        int.from_bytes(cached[8:12], "little") == int(st.st_mtime) & 0xFFFFFFFF
        and int.from_bytes(cached[12:16], "little") == st.st_size & 0xFFFFFFFF
    )


def _index(top: _CODE | None) -> dict:
    out: dict = {_CLASSES: set()}
    todo = [top] if top is not None else []
    while todo:
        c = todo.pop()
        out.setdefault((c.co_firstlineno, c.co_name), []).append(c)
        if c is not top and not c.co_flags & inspect.CO_NEWLOCALS:
            out[_CLASSES].add(c.co_qualname)  # a class statement's body
        todo.extend(k for k in c.co_consts if type(k) is _CODE)
    return out


def _generated(g: dict) -> dict:
    """The generated code of the methods of the classes ``g`` holds that a class
    statement of its file defines (not a class the program made there: review 45),
    by id."""
    e = _GENERATED.get(id(g))
    if e is not None and e[0] is g and e[1] == len(g):
        return e[2]
    ids = {}
    file = g.get("__file__")
    # (a class by its qualified name or the name the module holds it under, renamed
    # since: optimistix's ``EvalGrad.__qualname__ = "FunctionInfo.EvalGrad"``; not a
    # class another class holds: a library may store a user class there, review 69)
    for name, v in items(g):
        if is_a(v, type) and type(file) is str:
            if class_body(file, names(v)[1]) or (type(name) is str and class_body(file, name)):
                for m in list(cdict(v).values()):
                    ids.update((id(c), c) for c in _codes_of(m))
    if len(_GENERATED) > 1024:
        _GENERATED.clear()
    _GENERATED[id(g)] = (g, len(g), ids)  # (namespaces are kept alive by sys.modules)
    return ids


def _codes_of(m: Any) -> list:
    out = []
    for _ in range(4):  # through a wrapper's ``__wrapped__`` (``__repr__``'s recursion guard)
        if type(m) is types.FunctionType:
            if m.__code__.co_filename == "<string>":
                out.append(m.__code__)
            m = m.__dict__.get("__wrapped__")
        else:
            break
    return out


__all__ = ["defined_by"]
