"""What a persisted trace's process runs on, beside its program
(`pcache._persist_key`): which installed distribution provides each library module,
the environment variables, the interpreter's flags and the CPU's features. JAX-free.

Fail closed: every environment variable is in the key but the shell's, the
terminal's and the test runner's bookkeeping (`_SESSION`) and those the user names
(``JAX_PCACHE_TRACE_PERSIST_ENV_IGNORE``): a library may read any of them at import
(``SCIPY_ARRAY_API``) or from C (``NPY_DISABLE_CPU_FEATURES``), and no scan of its
files could prove which (review 54). And a loaded module named like one of the
standard library's or of an installed distribution's must be that one: a user file
shadowing a library JAX imports itself (``opt_einsum``) is met by no walk.
"""

from __future__ import annotations

import fnmatch
import functools
import hashlib
import os
import struct
import sys
import sysconfig
import time
import types
import zipfile
from importlib.machinery import ModuleSpec, NamespaceLoader
from typing import Any

import pcache.store as _store
import pcache.store.schemas as _schemas
from pcache import _memos
from pcache._dictwatch import tag
from pcache._hoststate import modules_stamp
from pcache._introspect import cdict, is_a, items, plain_module
from pcache._records import recorded
from pcache._usercode import (
    NoReuse,
    is_library_module,
    module_dict,
    qualname,
)

_ATTRIBUTED: dict = _memos.memo("persist.attributed", {})  # module -> (file, ok)
# pcache's own files: its package's directory's neighbours too (a checkout installs
# ``store/`` and ``schemas/`` as ``pcache.store`` and ``pcache.store.schemas``), and
# wherever the import system found those two for pcache (an editable install's finder
# maps them to its checkout while ``sys.path`` leads ``pcache`` to another copy: keyed
# as the program's, and ``pcache.store.schemas``, imported on a write only, made the
# writing process's keys differ from every reader's)
_PCACHE_HOME = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_PCACHE_HOMES = (
    _PCACHE_HOME,
    *(os.path.join(os.path.dirname(os.path.abspath(m.__file__)), "") for m in (_store, _schemas)),
)
# modules checked against shadowing: (name, file) pairs, and the count of sys.modules
_SHADOW: dict = _memos.memo("persist.shadow", {})
_LISTINGS: dict = _memos.memo("persist.dist_listings", {})  # path -> (stamp, names)
_DIST_DIRS = (".dist-info", ".egg-info")
_SETTLED_NS = 2_000_000_000
_HOMES: dict = _memos.memo("persist.homes", {})  # id(module) -> (module, a user's?)

# The shell's, the terminal's, the session's and the test runner's own variables:
# they differ between two runs of one program, and set nothing a library computes.
_SESSION = frozenset(
    {
        "_", "PWD", "OLDPWD", "SHLVL", "TERM", "COLORTERM", "LS_COLORS", "PS1", "PS2",
        "PROMPT_COMMAND", "HISTFILE", "HISTSIZE", "HISTFILESIZE", "HISTCONTROL", "MAIL",
        "MAILCHECK", "DISPLAY", "XAUTHORITY", "WINDOWID", "STY", "WINDOW", "COLUMNS",
        "LINES", "LESS", "LESSOPEN", "LESSCLOSE", "PAGER", "EDITOR", "VISUAL", "GPG_TTY",
        "DBUS_SESSION_BUS_ADDRESS", "XDG_RUNTIME_DIR", "XDG_SEAT", "XDG_VTNR", "MOTD_SHOWN",
    }
)  # fmt: skip
_SESSION_PREFIXES = ("JAX_PCACHE_", "SSH_", "TMUX", "TERM_", "XDG_SESSION_", "VSCODE_", "PYTEST_")


def keyed_environ(ignore: tuple[str, ...] = ()) -> tuple:
    """The environment variables in the key, sorted: all but `_SESSION`'s and those
    ``ignore`` names (a name, or a prefix ending in ``*``). Read again whenever
    ``os.environ`` was written (its dict's version tag: `_dictwatch.tag`), or on
    every call where the interpreter has none."""
    data = getattr(os.environ, "_data", None)
    stamp = tag(data) if type(data) is dict else None
    last = _ENVIRON.get("last")
    if stamp is not None and last is not None and last[:3] == (data, stamp, ignore):
        return last[3]
    got = tuple(
        sorted(
            (k, v)
            for k, v in os.environ.items()
            if k not in _SESSION
            and not k.startswith(_SESSION_PREFIXES)
            and not any(fnmatch.fnmatchcase(k, pat) for pat in ignore)
        )
    )
    if stamp is not None:
        _ENVIRON["last"] = (data, stamp, ignore, got)
    return got


_ENVIRON: dict = _memos.memo("persist.environ", {})  # last: (its dict, tag, ignore, keyed)


def library_flags() -> tuple:
    """absl's flags, by name, type and value, when ``absl.flags`` is loaded: a
    library object programs read while tracing (``FLAGS.scale``), set from the
    command line, that no walk keys (review 56); and what else of a flag a program
    can read (whether the command line gave it, its default), and whether the flags
    were parsed at all (an unparsed read raises: review 168)."""
    flags = sys.modules.get("absl.flags")
    if flags is None:
        return ()
    try:
        fv = module_dict(flags)["FLAGS"]
        out = []
        for name, v in sorted(fv.flag_values_dict().items()):
            f = fv[name]
            out.append((name, type(v).__qualname__, _exact(v), int(f.present),
                        bool(f.using_default_value), _exact(f.default)))  # fmt: skip
        return (bool(fv.is_parsed()), tuple(out))
    except Exception:  # noqa: BLE001 (whatever a changed absl raises: not persisted)
        raise NoReuse("persist-absl-flags-unreadable") from None


def _exact(v: Any) -> str:
    """A flag's value: a float by its bits (``repr`` prints every NaN alike: review
    172), in lists and tuples too; anything else by ``repr``."""
    if type(v) is float:
        return "f:" + struct.pack("<d", v).hex()
    if type(v) in (list, tuple):
        return f"{type(v).__name__}({','.join(map(_exact, v))})"
    return repr(v)


@functools.lru_cache(maxsize=1)
def process_facts() -> tuple:
    """What the interpreter and numpy were started with: ``sys.flags`` (``-O`` drops
    the ``assert`` a library checks its arguments with: review 54) and the CPU
    features numpy dispatches its loops on (another machine sharing the cache
    directory, ``NPY_DISABLE_CPU_FEATURES``: review 54). Fixed for a process."""
    try:
        from numpy._core import _multiarray_umath as umath
    except ImportError:  # (numpy 1.x)
        from numpy.core import _multiarray_umath as umath
    features = getattr(umath, "__cpu_features__", None)
    return (
        tuple(sys.flags),
        tuple(sorted(features.items())) if type(features) is dict else repr(features),
        tuple(getattr(umath, "__cpu_baseline__", ())),
        tuple(getattr(umath, "__cpu_dispatch__", ())),
    )


def check_unshadowed() -> None:
    """`NoReuse` when a loaded module is named like a standard-library module or a
    top-level module an installed distribution provides, but is not that file (a
    user copy of ``opt_einsum`` ahead on ``sys.path``: JAX imports it, no walk meets
    it). Each module looked at once; the rest of a call costs a length test."""
    mods = sys.modules
    stamp = modules_stamp()  # (not a count: a module replaced by another, review 60)
    if _SHADOW.get("count") == stamp:
        return
    _SHADOW["pass"] = _SHADOW.get("pass", 0) + 1  # (site directories listed again)
    provided, homes = _provided()
    seen: dict = {}  # module name -> a user module's?
    for name, m in items(mods):
        d = module_dict(m) or {}
        file = d.get("__file__")
        if type(file) is not str or _SHADOW.get((name, file)):
            continue
        spec = d.get("__spec__")
        if getattr(spec, "_initializing", False) is True:  # (still running its body:
            _SHADOW.pop("count", None)  # read again at the next call; review 58)
            continue
        # (a file in a site directory or the standard library's is its installer's:
        # whether a walk's module is listed in a RECORD is `attributed`'s question)
        if name.partition(".")[0] in provided and not file.startswith(homes):
            attributed(name)  # (raises for a module no distribution installed there)
        if file.startswith(homes) and name.partition(".")[0] in sys.stdlib_module_names:
            attributed(name)  # (a stdlib name in a site directory: review 64)
        if file.startswith(homes) and name.partition(".")[0] not in sys.stdlib_module_names:
            # (a loose file a library imports inside a function: review 60)
            attributed(name)
            _library_holds_no_user_code(name, m, homes, seen)
        _SHADOW[(name, file)] = True
    if any(getattr((module_dict(m) or {}).get("__spec__"), "_initializing", False) is True
           for m in list(mods.values())):  # fmt: skip
        return  # (not done: the count is not memoized)
    _SHADOW["count"] = stamp


_SOURCES = (".py", ".pyc", ".so", ".pyd")


def shadowing_files() -> tuple:
    """The program's own files on ``sys.path`` named like a standard-library module
    or a module an installed distribution provides, each by its content: loaded or
    not (a stdlib module imported while traced, ``stringprep`` by
    ``str.encode("idna")``, finds the user's copy first: review 60); in a directory
    (a package by every ``__init__`` file it has: source, bytecode or extension) or a
    zip archive, and in a directory nested in a site directory (a library's vendored
    copies) too: only the site and standard-library directories themselves are
    skipped (review 62). Memoized per ``sys.path`` and working directory; a file made
    while the program runs is not seen (documented, as edits are)."""
    provided, homes = _provided()
    key = ("files", tuple(sys.path), os.getcwd())
    got = _SHADOW.get(key)
    if got is not None:
        return got
    skip = set(homes) | {os.path.join(d, "lib-dynload", "") for d in _stdlib_dirs()}
    out = []
    for entry in sys.path:
        where = os.path.join(os.path.abspath(entry or "."), "")
        if where in skip or os.path.join(os.path.realpath(where), "") in skip:
            continue
        try:
            if os.path.isfile(entry):
                out += _zip_shadows(entry, provided)
                continue
            names = sorted(os.listdir(where))
        except (OSError, zipfile.BadZipFile):
            continue  # (not a directory or an archive: nothing imports from it)
        for n in names:
            top, path = n.partition(".")[0], where + n
            if top not in provided:
                continue
            if os.path.isdir(path):  # a package: its ``__init__`` files (a namespace
                parts = sorted(f for f in os.listdir(path) if f.startswith("__init__."))
                files = [os.path.join(path, f) for f in parts]  # portion: none, loses)
            else:
                files = [path] if n.endswith(_SOURCES) or ".cpython-" in n else []
            for f in files:
                try:
                    with open(f, "rb") as fh:
                        out.append((entry, os.path.relpath(f, where), _sha(fh.read())))
                except OSError:
                    raise NoReuse(f"persist-unreadable-shadow:{n}") from None
    got = _SHADOW[key] = tuple(out)
    return got


def _zip_shadows(archive: str, provided: frozenset) -> list:
    with zipfile.ZipFile(archive) as z:
        return [
            (archive, n, _sha(z.read(n)))
            for n in sorted(z.namelist())
            if n.partition("/")[0].partition(".")[0] in provided
            and (n.count("/") == 0 or n.rpartition("/")[2].startswith("__init__."))
        ]


def _sha(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


def _library_holds_no_user_code(name: str, m: Any, homes: tuple, seen: dict) -> None:
    """`NoReuse` when library module ``m`` holds, as a global, a user module, function
    or class, or a module of site-packages no distribution installed: its code runs
    them, keyed by its version only (``fakelib`` doing ``import helper``: review 56).
    Read once, at the module's first sight (what a program binds in an installed
    module later is documented as not seen)."""
    for v in list((module_dict(m) or {}).values()):
        t = type(v)
        if t is int or t is str or t is float or t is tuple or t is dict or t is bool:
            continue  # (most of a module's globals)
        if issubclass(t, types.ModuleType):
            d = module_dict(v) or {}
            file, mname = d.get("__file__"), d.get("__name__")
            if type(file) is not str or type(mname) is not str:
                continue  # (a namespace package, a builtin module: no code of its own)
            if not file.startswith(homes):
                if _user_module(v):
                    raise NoReuse(f"persist-library-holds-user-code:{name}")
            elif sys.modules.get(mname) is v:
                attributed(mname)  # (a loose file beside a distribution's)
        else:
            if t is types.FunctionType:
                home = v.__globals__.get("__name__")
            elif issubclass(t, type):
                home = v.__dict__.get("__module__")  # (a class statement's)
            else:
                continue
            user = seen.get(home) if type(home) is str else False
            if user is None:
                user = seen[home] = _user_home(home, homes)
            if user:
                raise NoReuse(f"persist-library-holds-user-code:{name}.{qualname(v)}")


def namespace_package(d: dict) -> bool:
    """Whether a file-less module's namespace ``d`` is a namespace package's, as the
    import system makes one (its spec has no origin, only search locations): not a
    module the program made and filled, whatever its shape (a ``__path__``: review
    169; its code since deleted, or in a static method: review 171)."""
    spec = d.get("__spec__")
    return (
        type(spec) is ModuleSpec
        and spec.origin is None
        and spec.submodule_search_locations is not None
        and type(spec.loader) is _NAMESPACE_LOADER  # (a spec of the program's: review 173)
        # (it holds its submodules and the import system's names, nothing else: a
        # loader swapped after code ran into it, review 175)
        and all(plain_module(v) or _dunder(k) for k, v in items(d))
    )


def _dunder(k: Any) -> bool:
    return type(k) is str and k.startswith("__") and k.endswith("__")


_NAMESPACE_LOADER = NamespaceLoader


def own_code(d: Any) -> bool:
    """Whether namespace ``d`` holds Python code made in it: a function whose globals
    it is, or a class holding one (a file-less module the program filled with
    ``exec`` of a file's text: review 169; not a namespace package, nor Cython's
    runtime)."""
    if type(d) is not dict:
        return False
    for _, v in items(d):
        if _made_in(v, d) or (is_a(v, type) and any(_made_in(f, d) for f in cdict(v).values())):
            return True
    return False


def _made_in(f: Any, d: dict) -> bool:
    """A function whose globals are ``d``, also wrapped (a static or class method)."""
    if type(f) in (staticmethod, classmethod):
        f = f.__func__
    return type(f) is types.FunctionType and f.__globals__ is d


def library_stand_in(name: Any, m: Any) -> bool:
    """Whether ``m``, no module, in ``sys.modules`` under ``name``, is one the
    standard library or a library package put there (``typing.io``); not the
    program's own file that replaced itself there (``sys.modules[__name__] =
    Facade()``), whose source nothing would key (review 168)."""
    top = name.partition(".")[0] if type(name) is str else ""
    tm = sys.modules.get(top)
    if top in sys.stdlib_module_names:
        return True
    return tm is not m and module_dict(tm) is not None and not user_module(top, tm)


def user_module(name: str, m: Any) -> bool:
    """Whether loaded module ``m`` is the program's own: not the standard library's,
    pcache's, or under a site directory, nor part of a library package (a module
    ``six.moves`` makes), nor library code by `is_library_module`."""
    top = name.partition(".")[0]
    file = (module_dict(m) or {}).get("__file__")
    if top in sys.stdlib_module_names:
        return False
    if top in ("pcache", "builtins", "cython_runtime") or top.startswith("_cython_"):
        # (Cython's shared runtime, made by its extensions, has no file; a module of
        # the program's own under such a name is the program's: review 70, also one
        # with no file whose code the program made, review 169)
        own = top == "pcache" and type(file) is str and file.startswith(_PCACHE_HOMES)
        if (type(file) is not str and not own_code(module_dict(m))) or own:
            return False
    if type(file) is str:
        if file.startswith(_provided()[1]):
            return False
    elif top != name and not _user_module(sys.modules.get(top)):
        return False  # (a file-less module of a library package)
    return _user_module(m)


def _user_home(module: str, homes: tuple) -> bool:
    """Whether ``module`` names a loaded user module of Python source (a user C
    extension's objects are refused where met: `pcache._persist_key.named`)."""
    if module.partition(".")[0] in sys.stdlib_module_names:
        return False
    home = sys.modules.get(module)
    file = (module_dict(home) or {}).get("__file__") if home is not None else None
    if type(file) is not str or file.startswith(homes):
        return False
    return file.endswith((".py", ".pyc")) and _user_module(home)


def _user_module(m: Any) -> bool:
    got = _HOMES.get(id(m))
    if got is None or got[0] is not m:
        got = _HOMES[id(m)] = (m, not is_library_module(m))
    return got[1]


def _provided() -> tuple[frozenset, tuple]:
    """The top-level module names of the standard library and of every distribution
    installed on ``sys.path`` (from their RECORD files), and the directories they are
    installed in (as ``sys.path`` and the real paths name them, with a separator)."""
    key = tuple(sys.path)
    got = _SHADOW.get(("provided", key))
    if got is None:
        tops = set(sys.stdlib_module_names)
        homes = {d + os.sep for d in _stdlib_dirs()}
        for entry in sys.path:
            recorded = _recorded(os.path.realpath(entry or "."))
            if os.path.basename(os.path.normpath(entry or ".")) in (
                "site-packages",
                "dist-packages",
            ):
                # (a site directory, RECORDs or not: its modules are library code in
                # process, so each must be attributed here: review 64)
                homes.update({os.path.join(os.path.abspath(entry), ""), os.path.join(os.path.realpath(entry), "")})  # fmt: skip
            if recorded:
                # ("" is the working directory: joined as it is, it prefixes every path)
                where = entry or os.getcwd()
                homes.update({os.path.join(os.path.abspath(where), ""), os.path.join(os.path.realpath(where), "")})  # fmt: skip
            for rel in recorded:
                top = rel.partition("/")[0]
                if top.endswith(".py"):
                    tops.add(top[:-3])
                elif (
                    not top.endswith((".dist-info", ".egg-info", ".data", ".pth"))
                    and "." not in top
                ):
                    tops.add(top)
                elif top.endswith((".so", ".pyd")):
                    tops.add(top.partition(".")[0])
        homes.update({os.path.join(os.path.realpath(d), "") for d in list(homes)})
        got = (frozenset(tops - {"..", "__pycache__"}), tuple(sorted(homes)))
        _SHADOW[("provided", key)] = got
    return got


def distributions() -> tuple:
    """Every installed distribution, as the names of the ``.dist-info`` and
    ``.egg-info`` directories of each ``sys.path`` entry (name and version), in
    ``sys.path``'s order (two versions of one distribution: the first one's modules
    load, review 62). Each entry's listing is read again whenever the directory
    changed (an install while the process runs: its modification and change times,
    inode and device; a tool that sets the modification time back still moves the
    change time: review 105), and not kept while either is under two seconds old: a
    change in the same clock tick as the listing leaves the times as they were."""
    out = []
    now = time.time_ns()
    for entry in sys.path:
        path = os.path.abspath(entry or ".")
        try:
            st = os.stat(path)
        except OSError:
            continue
        stamp = (st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev)
        got = _LISTINGS.get(path)
        if got is None or got[0] != stamp:
            try:
                with os.scandir(path) as it:
                    names = sorted(e.name for e in it if e.name.endswith(_DIST_DIRS))
            except OSError:
                continue
            got = (stamp, tuple(names))
            if now - max(st.st_mtime_ns, st.st_ctime_ns) > _SETTLED_NS:
                _LISTINGS[path] = got
        if got[1]:
            out.append(got[1])
    return tuple(out)


def attributed(module: str) -> str:
    """What provides library module ``module``, which must be a file of the standard
    library, of pcache, or one an installed distribution's RECORD lists: that
    distribution's ``.dist-info`` name (name and version), in the key with the
    module's name. A loose file in site-packages, even one named like a
    distribution's module, could change under the same name (review 38); two
    distributions may both install a module of one name, and which one loads
    depends on ``sys.path`` (review 44)."""
    m = sys.modules.get(module)
    file = (module_dict(m) or {}).get("__file__") if m is not None else None
    if file is None:
        if module in sys.builtin_module_names:
            return "builtin"
        raise NoReuse(f"persist-unattributed-module:{module}")
    e = _ATTRIBUTED.get(module)
    if e is None or e[0] != file:
        # (as named, then as the real file: an environment of links into a store,
        # as Nix or a linked venv builds, lists the file under the linked path)
        owner = _owner(module, os.path.abspath(str(file)))
        owner = owner or _owner(module, os.path.realpath(str(file)))
        e = _ATTRIBUTED[module] = (file, owner)
    if e[1] is None:
        raise NoReuse(f"persist-unattributed-module:{module}")
    return e[1]


def _owner(module: str, real: str) -> str | None:
    top = module.partition(".")[0]
    if top == "pcache":
        ok = real.startswith(os.path.dirname(os.path.abspath(__file__)) + os.sep)
        return "pcache" if ok else None
    if top in sys.stdlib_module_names:
        return "stdlib" if any(real.startswith(d + os.sep) for d in _stdlib_dirs()) else None
    here = os.path.dirname(real)  # (``_sysconfigdata_*``: the interpreter's own, unlisted)
    if any(here in (d, os.path.join(d, "lib-dynload")) for d in _stdlib_dirs()):
        return "stdlib"
    for root in _roots():
        if real.startswith(root + os.sep):
            rel = os.path.relpath(real, root).replace(os.sep, "/")
            owner = _recorded(root).get(rel)
            if owner is not None:
                return owner
    return None


def _roots() -> tuple[str, ...]:
    """``sys.path``'s entries as real paths (memoized per ``sys.path``)."""
    key = ("roots", tuple(sys.path))
    got = _SHADOW.get(key)
    if got is None:
        got = _SHADOW[key] = tuple(os.path.realpath(e or ".") for e in key[1])
    return got


@functools.lru_cache(maxsize=1)
def _stdlib_dirs() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    return tuple({os.path.realpath(paths[k]) for k in ("stdlib", "platstdlib")})


def _recorded(root: str) -> dict:
    """`pcache._records.recorded`, listed once per `check_unshadowed` pass."""
    e = _SHADOW.get(("recorded", root))
    if e is not None and e[0] == _SHADOW.get("pass"):
        return e[1]
    got = recorded(root)
    _SHADOW[("recorded", root)] = (_SHADOW.get("pass"), got)
    return got


__all__ = [
    "attributed",
    "check_unshadowed",
    "distributions",
    "keyed_environ",
    "library_flags",
    "user_module",
    "process_facts",
    "shadowing_files",
]
