"""Which loaded library modules hold an object, by attribute: an index of library
namespaces, each module indexed once when first seen loaded (not a walk of them all
per object asked). The key walk keys a value's identity with an object a library
holds (library code may compare with it by ``is``), and the persisted key names
such an object, or a class a library function made, by the module attribute
holding it.

JAX-free.
"""

from __future__ import annotations

import contextlib
import gc
import sys
import threading
import weakref
from collections.abc import Callable, Iterator
from importlib import _bootstrap
from importlib.machinery import ModuleSpec
from types import (
    BuiltinFunctionType,
    ClassMethodDescriptorType,
    GetSetDescriptorType,
    MemberDescriptorType,
    MethodDescriptorType,
    ModuleType,
    WrapperDescriptorType,
)
from types import FunctionType as _FUNCTION
from typing import Any

from pcache._dictwatch import Watch, read_tags, tag_cells, tagged
from pcache._introspect import (
    POSING,
    Override,
    cdict,
    dict_reader,
    flags,
    inst_dict,
    is_a,
    items,
    unwatched,
)
from pcache._memos import collector_paused, memo
from pcache._usercode import is_library_module, module_dict

_HOLDERS: dict = memo("persist.library_holders", {})  # index, modules indexed
_LOCK = threading.RLock()


def library_held(v: Any, t: type, index: dict | None = None) -> bool:
    """Whether ``v`` is the very object a library holds, as a module attribute or a
    class attribute of a class a library module holds (``FAST = "fast mode!"``,
    ``Mode.FAST``), at any depth, or its metaclass's: library code may compare a
    value with it by identity (reviews 76, 79, 137-140; an item of a library's
    container, ``MODES["fast"]``, is not seen). A class attribute counts while the
    class holds it, whatever became of the paths that reached the class (review 140:
    its first path rebound). Not those whose identity the value decides (CPython's
    cached small ints, empty and one-character strings), nor functions, classes and
    modules (keyed by identity). ``index``: `holders_index` as read at the start of a
    walk that runs no user code."""
    holders = (_index() if index is None else index).get(id(v))
    if holders is None:  # (most values: one lookup)
        return False
    if t is int:
        if -5 <= v <= 256:
            return False
    elif t in (str, bytes, tuple) and (not v or (len(v) == 1 and t is not tuple and
                                              (t is bytes or ord(v) < 256))):  # fmt: skip
        return False  # (CPython's cached empty and Latin-1 one-character ones)
    elif v is None or t is bool or unwatched(t) is ModuleType or is_a(v, type):
        return False  # (a function: held under a name not its own, `_index_module`)
    return any(_holds(h, v) for h in holders)


def module_held(v: Any) -> bool:
    """Whether a loaded library module holds ``v`` itself as a module attribute."""
    return any(type(h[0]) is str and _holds(h, v) for h in _index().get(id(v), ()))


def library_holders(v: Any, of_type: bool = False) -> list:
    """Every (module, attribute or ``Class.attribute``, any depth) under which a
    loaded library module holds ``v`` now (``of_type``: an instance of class ``v``, as
    a module attribute), each read back; none for what only a metaclass or a class
    no module still reaches holds (the persisted key refuses those)."""
    if not of_type and unwatched(type(v)) in _UNINDEXED:  # (not in `_index`)
        if type(v) is _FUNCTION:  # (a function: in an index of its own, `_functions`)
            found = list(_functions().get(id(v), ()))
        else:  # (a module: looked for here)
            found = [h for name, m in items(sys.modules) if is_library_module(m)
                     for h in _holding(name, module_dict(m), v)]  # fmt: skip
        return [h for h in found if resolve(*h) is v]
    index = _index()
    if of_type:
        found = [h for h in index.get(("type", id(v)), ()) if _holds(h, v, of_type)]
        return [h for h in found if _plain(h[1]) and type(resolve(*h)) is v]
    try:
        found = _paths(index, v, frozenset())
    except RecursionError:  # (classes nested past the interpreter's stack: unnamed)
        return []
    return [h for h in found if resolve(*h) is v]  # (each name reads back to ``v``)


def _plain(name: Any) -> bool:
    """Whether ``name`` can be a part of a dotted name read back by `resolve`
    without meaning another path (no dot; not `TYPE_PART` or `FUNC_PART`: review
    143, ``setattr(C, "a.b", x)`` beside ``C.a.b``)."""
    return type(name) is str and "." not in name and name != TYPE_PART and name != FUNC_PART


def _paths(index: dict, v: Any, seen: frozenset) -> list:
    """(module, dotted path) of each live path from a library module to ``v``; a
    class no such path reaches by an instance a module holds, ``OBJ.<type>`` (a
    class a library function made: lineax's tokens, `TYPE_PART`)."""
    out = []
    for h in index.get(id(v), ()):
        if not _holds(h, v):
            continue
        owner, name = h[0], h[1]
        if not (name is _META or _plain(name)):
            continue  # (a name no dotted path tells apart: review 143)
        if type(owner) is str:
            out.append(h)
        elif name is not _META and id(owner) not in seen:
            name = ".".join(h[1:])  # (a static method's function: ``S.pa.<func>``)
            out += [(m, f"{q}.{name}") for m, q in _paths(index, owner, seen | {id(owner)})]
    if not out and is_a(v, type):
        out = [(m, f"{a}.{TYPE_PART}") for m, a in index.get(("type", id(v)), ())
               if _plain(a) and _holds((m, a), v, of_type=True)]  # fmt: skip
    return out


def resolve(module: str, qual: str) -> Any:
    """The object at ``module:qual`` (a name `library_holders` gives), read from
    namespaces as the interpreter holds them (no ``getattr``: nothing runs), or
    None."""
    v: Any = sys.modules.get(module)
    for part in qual.split("."):
        if part == TYPE_PART and v is not None:  # (the class of an instance: `_holders`)
            v = type(v)
            continue
        if part == FUNC_PART:  # (what a static or class method wraps)
            if type(v) is not staticmethod and type(v) is not classmethod:
                return None
            v = v.__func__
            continue
        if is_a(v, ModuleType):
            d = module_dict(v)
        elif is_a(v, type):
            d = cdict(v)
        else:  # (an instance a library holds: its own attribute, `_holders`)
            try:
                d = inst_dict(v) if v is not None else None
            except Override:
                return None
        if d is None or part not in d:
            return None
        v = d[part]
    return v


def _holding(name: str, d: dict | None, v: Any) -> list:
    """(name, attribute) and (name, class.attribute) of namespace ``d`` holding ``v``."""
    out = []
    for k, x in items(d or {}):
        if type(k) is str:
            if x is v:
                out.append((name, k))
            elif flags(type(x)) & _TYPE_SUBCLASS:
                out += [(name, f"{k}.{a}") for a, y in items(cdict(x))
                        if y is v and type(a) is str]  # fmt: skip
    return out


def _holds(h: tuple, v: Any, of_type: bool = False) -> bool:
    """Whether holder ``h`` still holds ``v`` (an instance of ``v``: ``of_type``): a
    (module, attribute), a (class, attribute), (class, attribute, `FUNC_PART`): what a
    static method there wraps, an (instance, attribute), or (class, `_META`): its
    metaclass."""
    owner, name = h[0], h[1]
    if type(owner) is str:
        d = module_dict(sys.modules.get(owner))
        x = d.get(name, _HOLDERS) if d is not None else _HOLDERS
    elif name is _META:
        x = type(owner)
    elif is_a(owner, type):
        x = cdict(owner).get(name, _HOLDERS)
        if len(h) == 3:
            x = unwrapped(x)
    else:  # (an instance's attribute)
        try:
            x = (inst_dict(owner) or {}).get(name, _HOLDERS)
        except Override:
            x = _HOLDERS
    return (type(x) if of_type else x) is v


def unwrapped(x: Any) -> Any:
    """What a static or class method ``x`` wraps (`FUNC_PART`); a marker for
    anything else."""
    return x.__func__ if type(x) is staticmethod or type(x) is classmethod else _HOLDERS


def holders_index() -> dict:
    """The index `library_held` reads: id -> holders (a dict not to be written)."""
    return _index()


def _index() -> dict:
    """id -> holders, each library module indexed when first seen loaded and again
    whenever its namespace was written (not a walk of them all per value asked:
    `_indexed`)."""
    return _indexed("", _index_module)


def _functions() -> dict:
    """id -> (module, attribute or ``Class.attribute``) of every function a library
    module holds there, under any name (`_index` leaves functions out: most module
    and class attributes are), as `_holding` finds them; made when a function is
    first asked about, each module then indexed as `_index` does (a scan of every
    library namespace per function asked cost ~30 ms: session 36, diffrax)."""
    return _indexed("fn:", _index_functions)


def epoch(functions: bool = False) -> int:
    """A count that moves whenever the index (of functions: ``functions``) takes in
    a module again: what `library_holders` answers from it is the same while the
    count is."""
    _functions() if functions else _index()
    return _HOLDERS.get(("fn:" if functions else "") + "epoch", 0)


def _indexed(tag: str, index_module: Callable) -> dict:
    """The index ``tag`` names, each library module indexed (``index_module``) when
    first seen loaded and again after its namespace, or a class namespace the
    indexing read, was written (a name a library binds after its import, lazily or
    from a plugin's import: review 230; told by version tags, `_dictwatch`, where
    this interpreter has them, else only modules loaded anew are), looked for again
    whenever ``sys.modules`` or one of those namespaces was written."""
    ready = _HOLDERS.get(tag + "ready")  # (index, tag cells, their tags when read)
    looked = getattr(_SCOPE, "looked", None)
    if ready is not None and (
        (looked is not None and tag in looked) or _still(ready)
    ):  # fmt: skip
        if looked is not None:
            looked.add(tag)
        return ready[0]
    with _LOCK, collector_paused():  # (~70k holders: `_memos.collector_paused`)
        index = _HOLDERS.setdefault(tag + "index", {})
        # name -> (module, tags when indexed, class dicts read, tag cells, a library's?)
        done = _HOLDERS.setdefault(tag + "done", {})
        classes = _HOLDERS.setdefault(tag + "classes", {})  # id -> class: each read once
        head = tag_cells((sys.modules,))
        watch = None if tagged() else Watch()
        if watch is not None:
            watch.start((sys.modules,))
        cells, last = [*head], [*read_tags(head)]  # (read before the namespaces are)
        complete, first, again = True, {}, {}  # (this pass's holders: modules new, again)
        pending = False  # (a library module among those left for later)
        for name, m in items(sys.modules):
            got = done.get(name)
            if got is not None and got[0] is m and read_tags(got[3]) == got[1]:
                if got[4]:
                    cells += got[3]
                    last += got[1]
                continue
            d = module_dict(m)
            spec = (d or {}).get("__spec__")
            if type(spec) is ModuleSpec and vars(spec).get("_initializing"):
                complete = False  # (still running its body: indexed next time)
                pending = pending or (is_library_module(m) and _importing_here(name))
                continue
            lib = is_library_module(m)
            own = tag_cells((d,)) if type(d) is dict else ()
            now = read_tags(own)
            held = index_module(first if got is None else again, name, d, classes) if lib else ()
            held = tuple(held or ())  # (kept alive here: their memory stays theirs)
            inner = tag_cells(held)
            done[name] = (m, now + read_tags(inner), held, own + inner, lib)
            if lib:
                cells += own + inner
                last += done[name][1]
        for k, hs in first.items():
            index.setdefault(k, []).extend(hs)
        for k, hs in again.items():  # (what the index held of it already: not twice)
            kept = index.setdefault(k, [])
            have = {_same(h) for h in kept}
            kept += [h for h in hs if _same(h) not in have and not have.add(_same(h))]
        if first or again:
            _HOLDERS[tag + "epoch"] = _HOLDERS.get(tag + "epoch", 0) + 1
        _HOLDERS[tag + "ready"] = (index, tuple(cells), tuple(last), watch) if complete else None
        _HOLDERS[tag + "pending"] = pending
        if complete and looked is not None:
            looked.add(tag)
        return index


def indexed_whole() -> bool:
    """Whether the holders index holds every loaded library module: not while this
    thread runs one's body (it is left for later; a program module's body, or one
    another thread imports, is none of this call's business), whose objects no key could then name by
    identity (review 232: a library's import made a jit call over its own token,
    keyed by content, and B's equal object was served A's trace)."""
    _index()
    return not _HOLDERS.get("pending")


def _importing_here(name: str) -> bool:
    """Whether this thread runs module ``name``'s body (it holds the import system's
    lock of that module; where that cannot be told, yes): a call another thread makes
    meanwhile is not inside it (pcache's own preload imports beside the program)."""
    locks = getattr(_bootstrap, "_module_locks", None)
    ref = locks.get(name) if type(locks) is dict else None
    lock = ref() if type(ref) is weakref.ref else None
    owner = getattr(lock, "owner", _HOLDERS) if lock is not None else _HOLDERS
    return owner is _HOLDERS or owner == threading.get_ident()


def _still(ready: tuple) -> bool:
    """Whether nothing an index was read from was written since (where there are no
    version tags: ``sys.modules``, entry by entry)."""
    watch = ready[3]
    return read_tags(ready[1]) == ready[2] if watch is None else watch.still((sys.modules,))


_SCOPE = threading.local()  # .looked: the indexes checked in this `one_look`


@contextlib.contextmanager
def one_look() -> Iterator[None]:
    """Within it each index is checked for written namespaces once (~1000 version
    tags, ~60 us, asked per walk and per name otherwise): for pcache's own reading
    of one call, which runs no program or library code. Each is a look of its own,
    also inside another (review 231: a jit call made by program code that ran
    inside another call's walk, a property, a collector's callback, read the index
    as the outer call had first read it: a name bound in between was missed); a
    write by another thread meanwhile is seen at the next look."""
    outer = getattr(_SCOPE, "looked", None)
    _SCOPE.looked = set()
    try:
        yield
    finally:
        _SCOPE.looked = outer


def _same(h: tuple) -> tuple:
    """A holder by identity, a name by its text (no ``__eq__`` of a library's object
    runs)."""
    return tuple(x if type(x) is str else id(x) for x in h)


def _index_functions(index: dict, name: str, d: dict | None, _classes: dict) -> tuple:
    """Functions of namespace ``d`` and of the classes it holds; returns those classes'
    own dicts (watched: ``H.CUR = FA`` after the index was made, review 230)."""
    add, inner = index.setdefault, []
    for k, x in dict.copy(d or {}).items():  # (a private copy, made in C)
        if type(k) is not str:
            continue
        if type(x) is _FUNCTION:
            add(id(x), []).append((name, k))
        elif flags(type(x)) & _TYPE_SUBCLASS:
            space = cdict(x)
            held = gc.get_referents(space)  # (the dict a class's mapping proxy shows)
            if len(held) == 1 and type(held[0]) is dict:
                inner.append(held[0])
            for a, y in items(space):
                if type(y) is _FUNCTION and type(a) is str:
                    add(id(y), []).append((name, f"{k}.{a}"))
    return tuple(inner)


def _index_module(index: dict, name: str, d: dict | None, classes: dict) -> None:
    add = index.setdefault
    # (a private copy, made in C: iterated without another thread's writes)
    for k, x in dict.copy(d or {}).items():
        if type(k) is not str:
            continue
        tx = unwatched(type(x)) if POSING else type(x)  # (a watched module: a module)
        if tx in _UNINDEXED:
            if tx is _FUNCTION and x.__name__ != k:  # (``FA = lambda: 1``: review 142)
                add(id(x), []).append((name, k))
            continue  # (functions and modules: keyed by what they are, never asked here)
        add(id(x), []).append((name, k))
        if id(tx) in _NAMED_TYPES:
            continue  # (a builtin value: no class attributes)
        add(("type", id(tx)), []).append((name, k))
        # (a class, the interpreter's own flag; an instance's class: one a library
        # function made is reached by ``type(OBJ)`` only: review 141)
        if flags(tx) & _TYPE_SUBCLASS:
            _index_classes(add, x, classes)
        else:
            _index_instance(add, x, classes)
            _index_classes(add, tx, classes)


def _index_instance(add: Any, x: Any, classes: dict) -> None:
    """The objects instance ``x`` a library holds holds as attributes, held as
    (instance, name) (an enum member's value, a descriptor's field: review 142); not
    builtin values (numbers, strings, containers: keyed by value, and as a module's
    or class's when one holds them)."""
    tx = type(x)
    reader = classes.get(("dict", id(tx)), _HOLDERS)  # (one reader a type: `dict_reader`)
    if reader is _HOLDERS:
        reader = classes[("dict", id(tx))] = dict_reader(tx)
    if reader is None or reader is Override:
        return
    d = reader.__get__(x, tx)
    if type(d) is not dict:
        return
    for a, y in d.copy().items():
        if type(a) is str and id(type(y)) not in _NAMED_TYPES:
            add(id(y), []).append((x, a))


def _index_classes(add: Any, cls: type, classes: dict) -> None:
    """The attributes of library class ``cls`` and of every class it holds (a nested
    class, an alias: reviews 138, 139), is an instance of (its metaclass: review 140)
    or holds an instance of (review 141), at any depth, each class read once
    (``classes`` keeps it: an id stays its own), every attribute held as (class,
    name): by the class itself, whatever later becomes of the path that reached it
    (review 140). Not its methods (a function under its own name), nor the
    bookkeeping the class statement writes (its name, doc, module), but anything else
    under a dunder name too (a property over one getter as another, a ``partial``, an
    instance, a string compared by ``is``: told apart by identity only, reviews
    137-140), and what a static or class method wraps (review 142)."""
    todo = [cls]
    while todo:
        c = todo.pop()
        if id(c) in classes:
            continue
        classes[id(c)] = c
        for a, y in cdict(c).copy().items():
            ty = type(y)
            if type(a) is not str or a in _BOOKKEEPING:
                continue
            if id(ty) in _UNHELD:
                if ty is _FUNCTION and y.__name__ != a:  # (``fa = _make()``: review 142)
                    add(id(y), []).append((c, a))
                continue
            add(id(y), []).append((c, a))
            if ty is staticmethod or ty is classmethod:  # (what ``S.pa`` gives: review 142)
                f = y.__func__
                if type(f) is not _FUNCTION or f.__name__ != a:
                    add(id(f), []).append((c, a, FUNC_PART))
            elif id(ty) not in _NAMED_TYPES and not flags(ty) & _TYPE_SUBCLASS:
                _index_instance(add, y, classes)
            if flags(ty) & _TYPE_SUBCLASS:
                todo.append(y)
            elif id(ty) not in classes and id(ty) not in _NAMED_TYPES:
                todo.append(ty)  # (an instance's class: review 141)
        meta = type(c)
        if meta is not type:
            add(id(meta), []).append((c, _META))
            todo.append(meta)


#: A path's part naming the class of what the path before it reaches (no name a
#: class statement or module binds holds ``<``)
TYPE_PART = "<type>"
#: A path's part naming the function a static or class method wraps
FUNC_PART = "<func>"
_META: Any = object()  # (a holder's name for ``type(class)``: no attribute's name)
#: What the interpreter and the class statement write into every class, which no
#: program compares by identity (review 140: a library's own ``__mode__ = "fast"``
#: is indexed, as any other name)
_BOOKKEEPING = frozenset({
    "__module__", "__qualname__", "__doc__", "__dict__", "__weakref__", "__slots__",
    "__annotations__", "__orig_bases__", "__parameters__", "__match_args__",
    "__firstlineno__", "__static_attributes__", "__abstractmethods__", "_abc_impl",
    "__hash__", "__dataclass_fields__", "__dataclass_params__",
})  # fmt: skip


#: Module and class attributes not indexed (most of them; `library_holders` looks for
#: one by a scan): `library_held` answers no for them, and the keys name them by
#: what they are (a function by its code, a module by its name)
_UNINDEXED = frozenset({_FUNCTION, ModuleType})
#: Class attributes not indexed: functions, and the descriptors a C type or a
#: class's slots make (a third of all class attributes), which the walks key by
#: their class and name or refuse. Properties and static and class methods stay:
#: the walk keys a program's by content, and two of a library's over one getter
#: (numpy's ``MaskedArray.data`` and ``._data``) are told apart only by their
#: identity here (review 137).
_UNHELD = frozenset(
    map(
        id,
        (_FUNCTION, MemberDescriptorType, GetSetDescriptorType, MethodDescriptorType,
         WrapperDescriptorType, ClassMethodDescriptorType),
    )
)  # fmt: skip
#: Types whose instances are no class and whose own class any key names by its
#: name (``library_holders(t, of_type=True)`` is asked of classes no name resolves):
#: most module attributes, indexed by identity only (a third of the index's cost)
_TYPE_SUBCLASS = 1 << 31  # (Py_TPFLAGS_TYPE_SUBCLASS)
_NAMED_TYPES = frozenset(
    map(
        id,
        (_FUNCTION, ModuleType, BuiltinFunctionType, int, float, complex, str, bytes,
         bool, type(None), tuple, list, dict, set, frozenset),
    )
)  # fmt: skip


__all__ = [
    "FUNC_PART",
    "TYPE_PART",
    "holders_index",
    "library_held",
    "library_holders",
    "module_held",
]
