"""The cross-process key of a traced call (issue 27: persisted traces).

In one process, trace reuse (`pcache._trace`) keys a callable by what it is built
from, naming some objects by identity: code objects, globals dicts, modules, library
classes and functions, sentinels, JAX arrays. An identity means nothing in another
process. This module keys the same things with every identity replaced by content
or by a name that resolves back, in this process, to that very object:

* code by its content (bytecode, constants recursively, names, flags, argument
  layout; not its file or line: moving code is not a change);
* a function's globals by the name of the module whose namespace they are; builtins
  only as Python's own;
* modules, classes (library and user; a library's with its shape), builtin
  functions, descriptors, ufuncs and JAX's primitives by ``module:qualname`` (checked
  to resolve back to the object); a library object (``np.inf``, a sentinel) by the
  least name a library module holds it under; a NaN made by user code as such;
* JAX's immutable values (shardings, meshes, devices, avals, the context mesh) by
  their canonical encoding (`pcache._canon.canonicalize`, the executable key's);
* every JAX option by name, the host state, the registries' user rules and nodes,
  the globals' guards (values by content, modules by name), the avals and the
  argument signature, exactly as the in-process key walks them (one walker, two
  modes: `ContentWalker` overrides only how an identity is written, so the
  allowlist cannot drift between the two keys);
* the environment: JAX, jaxlib, Python, platform, devices, pcache's version, XLA
  flags, installed distributions' names and versions, ``PYTHONHASHSEED``, ``JAX_*``
  and ``XLA_*`` variables.

What cannot be named is refused (`NoReuse` with a ``persist-`` reason): a captured
JAX array, a user primitive, a local class, a function whose globals are not an
imported module's, an object a library holds under no name, a library module no
installed distribution or the standard library provides. The key is the sha256 of
an injective serialization (`pcache._persist_pack`) of ``str``, ``bytes``, ``int``,
``bool``, ``None`` and tuples: never a ``repr``.
"""

from __future__ import annotations

import builtins
import functools
import hashlib
import os
import sys
import types
from importlib.machinery import ModuleSpec
from typing import Any

import numpy as np

from pcache import (
    _canon,
    _canon_rules,
    _compat,
    _guards,
    _hoststate,
    _memos,
    _persist_env,
    _usercode,
)
from pcache._class_shape import shape
from pcache._errors import Uncacheable
from pcache._holders import library_holders, one_look
from pcache._holders import resolve as _resolve
from pcache._introspect import cdict, is_a, items, names
from pcache._persist_abcs import abc_registrations, library_rules
from pcache._persist_code import HASH_SEED, code_digest, source_digest
from pcache._persist_env import attributed
from pcache._persist_names import (
    _bound,
    _file,
    _lib_node,
    _library_names,
    _rebinds,
    library_name,
    library_primitive,
    library_primitive_name,
    library_value,
    resolve_name,
)
from pcache._persist_pack import packed as _packed
from pcache._snapshots import reloaded, unchanged
from pcache._usercode import NoReuse, is_library_module, module_dict, qualname
from pcache._walk import Walker, plain_array
from pcache._walk_kinds import is_library_float

#: Bytes of JAX arrays one key may hold by content (design section 7's bound).
MAX_JAX_ARRAY_BYTES = 256 * 1024
#: The key's own domain: never an executable key.
DOMAIN = b"pcache-trace-1\n"
_BUILTINS = vars(builtins)
_NODES: dict = _memos.memo("persist.pytree_nodes", {})  # "nodes" -> (registry, digest)
_SETTINGS: dict = _memos.memo("persist.settings", {})  # typed settings -> digests
_MISSING = object()
_HEAPTYPE = 1 << 9  # (Py_TPFLAGS_HEAPTYPE: a class made by a class statement)
_FLAGS = type.__dict__["__flags__"].__get__
_ENV: dict = _memos.memo("persist.environment", {})  # what can change -> digest
_USER_CODE: dict = _memos.memo("persist.user_code", {})  # "all" -> (stamp, digest)


class ContentWalker(Walker):
    """`Walker` with every identity written as content or a resolving name."""

    __slots__ = ("addresses",)
    content = True

    def __init__(self, addresses: bool = False) -> None:
        super().__init__()
        self.addresses: list[int] | None = [] if addresses else None

    def address(self, v: int) -> Any:
        """An int that may be the ``id()`` of an object: a memo keyed by its
        arguments' ids (numpyro's ``MCMC._cache``) holds a new one in every process.
        In a walk that resolves addresses (`resolved`) it is written as a
        placeholder; elsewhere as the int (no key across processes)."""
        if self.addresses is None:
            return ("i", v)
        self.addresses.append(v)
        return ("addr", len(self.addresses) - 1)

    def resolved(self) -> tuple:
        """What each placeholder of `address` was, once the walk is done: the
        number of the object of this walk whose ``id()`` it is (an identity this
        walk keys by content), else the int itself.

        Sound for an int used as an identity token (compared, hashed: a memo's
        key), which is all ``id()`` promises; arithmetic on an address gives a
        different program in every process, as randomness does (documented)."""
        seen, found = self.seen, self.addresses or ()
        self.addresses = None  # (an int met after this is written as itself)
        return tuple(("@", seen[v]) if v in seen else ("i", v) for v in found)

    def ident(self, v: Any) -> tuple:
        self.pins.append(v)
        return named(v)

    def held(self, v: Any) -> Any:
        self.pins.append(v)
        return ("own",)

    def same(self, v: Any) -> Any:
        try:
            return ("canon", _canon.canonicalize(v))
        except Uncacheable:
            raise NoReuse(f"persist-value:{qualname(type(v))}") from None

    def code(self, code: types.CodeType) -> Any:
        return code_digest(code)

    def library_code(self, code: types.CodeType) -> Any:
        # (and where in its file: the distribution's version pins the file, and two
        # of its functions of equal code, ``FA = lambda: 1; FB = lambda: 1``, differ
        # to its ``is`` by their definition: review 141)
        return (code_digest(code), code.co_firstlineno, code.co_linetable)

    def namespace(self, g: dict) -> Any:
        return namespace_name(g)

    def _jax_array(self, v: Any) -> tuple:
        """A JAX array the callable holds, by content (phase 2): its values (a
        digest), dtype, shape, weak type, committedness and sharding, at most
        `MAX_JAX_ARRAY_BYTES` in one key; a typed PRNG key array, a deleted one, or
        one with attributes of the program's: refused."""
        if type(v) is not _compat.ArrayImpl or not plain_array(v) or v.is_deleted():
            raise NoReuse("persist-jax-array")
        if not isinstance(v.dtype, np.dtype) or v.dtype.hasobject:
            raise NoReuse("persist-jax-array")
        back = self._enter(v)
        if back is not None:
            return back
        self.arrays.append(v)
        if sum(a.nbytes for a in self.arrays) > MAX_JAX_ARRAY_BYTES:
            raise NoReuse("persist-jax-array-too-large")
        data = np.ascontiguousarray(np.asarray(v)).tobytes()
        # (the dtype by all it is: ``dtype.str`` is '<V1' for int4, uint4 and every
        # float8 alike, review 113; the layout a committed array may have been put in)
        return ("A", self.dtype(v.dtype), v.shape, bool(v.aval.weak_type), bool(v._committed),
                self.same(v.sharding), repr(v.format.layout), hashlib.sha256(data).hexdigest())  # fmt: skip


# ------------------------------------------------------------ names


def _module_name(m: types.ModuleType) -> tuple[str, str]:
    """(the name of module ``m``, what provides it: `attributed`; "" for user code)."""
    name = (module_dict(m) or {}).get("__name__")
    if type(name) is not str or sys.modules.get(name) is not m:
        raise NoReuse("persist-unnamed-module")
    return name, attributed(name) if is_library_module(m) else ""


def named(v: Any) -> tuple:
    """A name for ``v`` that resolves back to ``v`` in this process."""
    t = type(v)
    if v is None or t is bool or v is ... or v is NotImplemented:
        return ("const", repr(v))  # (one object each: no name tells them apart)
    if is_a(v, types.ModuleType):
        return ("mod", *_module_name(v))
    if t is _compat.ArrayImpl:
        raise NoReuse("persist-jax-array")
    if is_a(v, type):
        _, qual, mod = names(v)
        if (
            type(mod) is str
            and type(qual) is str
            and _resolve(mod, qual) is v
            and _bound(mod, qual)
        ):
            got = ("cls", *_module_name(sys.modules[mod]), qual)
            if not got[2] and not _FLAGS(v) & _HEAPTYPE:
                raise NoReuse("persist-user-extension")  # (review 54)
            # (a library's with what it is, however its name was rebound: review 176)
            return (*got, shape(v, module_dict(sys.modules[mod]))) if got[2] else got
        lib = _library_names(v)  # (a class whose names say otherwise: ``jax.Array``)
        if lib:
            return _lib_node(lib)
        # a class a library function made, whose instance a library module holds
        # (lineax's tokens: ``_qr_token = eqxi.str2jax("qr_token")``), by those names
        held = tuple(sorted(set(library_holders(v, of_type=True))))
        if held:
            return ("libtype", *_lib_node(held)[1:])
        raise NoReuse(f"persist-local-class:{qual}")
    prim = _canon.jax_primitive_name(v) if is_a(v, _compat.Primitive) else None
    if prim is not None:
        return ("prim", prim)
    if t is types.BuiltinFunctionType:
        owner = v.__self__
        mod = owner if is_a(owner, types.ModuleType) else sys.modules.get(v.__module__ or "")
        if owner is None or owner is mod:
            if mod is not None and (module_dict(mod) or {}).get(v.__name__) is v:
                got = ("fn", *_module_name(mod), v.__name__)
                if not got[2]:  # a user C extension's: no content to key (review 54)
                    raise NoReuse("persist-user-extension")
                return got
    if t in (
        types.WrapperDescriptorType,
        types.MethodDescriptorType,
        types.ClassMethodDescriptorType,
    ):
        owner = v.__objclass__
        if cdict(owner).get(v.__name__) is v:
            return ("desc", named(owner), v.__name__)
    if t is np.ufunc and getattr(np, v.__name__, None) is v:
        return ("ufunc", v.__name__)
    if t is float or is_a(v, np.generic):
        # (a library's own: ``np.True_``, ``math.inf``, by the name it holds it under)
        lib = _library_names(v) if t is not float or is_library_float(v) else None
        if lib:
            return _lib_node(lib)
        # a NaN of the program's own: whether it is the very NaN another object holds
        # (a code constant: ``G in (n,)``) has no name across processes (review 41)
        raise NoReuse("persist-nan-identity" if t is float else f"persist-identity:{qualname(t)}")
    # (a bare ``object()`` sentinel plays its role by the name a module holds it under)
    lib = _library_names(v, any_module=t is object)
    if lib:
        return _lib_node(lib)
    raise NoReuse(f"persist-identity:{qualname(t)}")


def namespace_name(g: dict) -> tuple:
    if g is _BUILTINS:
        return ("builtins",)
    if g is sys.modules:  # (an import's module)
        return ("sys.modules",)
    if _namedtuple_globals(g):
        return ("namedtuple",)
    if type(g) is dict and not g:  # (its builtins: none; by content)
        return ("empty",)
    name = g.get("__name__")
    m = sys.modules.get(name) if type(name) is str else None
    if m is None or module_dict(m) is not g:
        if gen := _usercode.generated_namespace(g):  # (equinox's flatten's: `pcache._generated`)
            return ("generated", gen, attributed(gen))
        raise NoReuse(f"persist-globals-not-a-module:{name}")
    return ("ns", *_module_name(m))


def _user_code() -> str:
    """Every loaded user module's code by content (compiled from its source, without
    positions: moved code still hits): what an installed library holds or imports
    of the program's own (a helper it imports, a function kept in its registry or
    held by a partial, a base class: review 58) is keyed, whoever reaches it. A user
    module with no source (built at run time, bytecode only, an extension) refuses;
    so does one still running its body. And which imports are blocked (``None`` in
    ``sys.modules``). Recomputed when the module count changes."""
    stamp = _hoststate.modules_stamp()  # (a module replaced by another: review 60)
    got = _USER_CODE.get("all")
    if got is not None and got[0] == stamp:
        return got[1]
    out = []
    for name, m in items(sys.modules):
        if m is None:  # (an import blocked the interpreter's way: review 107)
            out.append((name, "blocked"))
            continue
        d = module_dict(m)
        if d is None and not _persist_env.library_stand_in(name, m):
            raise NoReuse(f"persist-non-module:{name}")
        if d is None or not _persist_env.user_module(name, m):
            continue
        if reloaded(name, m):  # (its source says what it holds now, not what it held)
            raise NoReuse(f"persist-reloaded-module:{name}")
        spec = d.get("__spec__")
        if type(spec) is ModuleSpec and vars(spec).get("_initializing"):
            raise NoReuse(f"persist-module-initializing:{name}")
        file = d.get("__file__")
        if type(file) is not str:
            if _persist_env.namespace_package(d) or name == "__main__":
                continue  # (a namespace package; an interactive session's main)
            raise NoReuse(f"persist-sourceless-module:{name}")
        out.append((name, source_digest(file, name)))
    res = digest(("user-code", tuple(sorted(out))))
    _USER_CODE["all"] = (stamp, res)
    return res


def _namedtuple_globals(g: dict) -> bool:
    """Whether ``g`` is what ``collections.namedtuple`` execs a class's ``__new__``
    in: its name, no builtins, ``tuple.__new__`` (nothing else to name)."""
    name = g.get("__name__")
    return (
        type(name) is str
        and name.startswith("namedtuple_")
        and g.keys() == {"__name__", "__builtins__", "_tuple_new"}
        and g["_tuple_new"] is tuple.__new__
        and type(g["__builtins__"]) is dict
        and not g["__builtins__"]
    )


@functools.lru_cache(maxsize=1)
def _own_source() -> str:
    """pcache's own code (what decides keys and entries), by content."""
    root = os.path.dirname(os.path.abspath(__file__))
    out = []
    for d, subdirs, files in sorted(os.walk(root)):
        subdirs.sort()
        for f in sorted(files):
            if f.endswith(".py"):
                with open(os.path.join(d, f), "rb") as fh:
                    out.append((os.path.relpath(os.path.join(d, f), root), fh.read()))
    return _packed(b"pcache-source\n", tuple(out))


# ------------------------------------------------------------ the key


def _canonical(v: Any, what: str) -> str:
    try:
        return _canon.canonicalize(v)
    except Uncacheable:
        raise NoReuse(f"persist-{what}") from None


def _guard_parts(guards: list, w: ContentWalker) -> tuple:
    out = []
    for guard in guards:
        kind, ns, name, expected = guard[:4]
        if kind == _guards.ALIASES:
            out.append((kind, expected))
        elif kind == _guards.TYPE:
            out.append((kind, named(ns), named(expected)))
        elif kind == _guards.ABSENT:
            out.append((kind, namespace_name(ns), name))
        elif kind == _guards.NAMES:
            out.append((kind, namespace_name(ns), tuple(sorted(expected))))
        elif kind == _guards.VAL:
            out.append((kind, namespace_name(ns), name, expected))
        elif kind == _guards.IS:
            got = w._jax_array(expected) if type(expected) is _compat.ArrayImpl else None
            out.append((kind, namespace_name(ns), name, got or w.ident(expected)))
        elif kind == _guards.LIBATTR:
            out.append((kind, namespace_name(ns), name, *library_value(ns, name, expected)))
        elif kind == _guards.PLAIN:  # (a global JAX array: by content, its IS guard)
            out.append((kind,))
        else:  # (an identity guard a content walk does not make)
            raise NoReuse(f"persist-guard:{kind}")
    return tuple(out)


def module_reads(guards: list) -> str:
    """The digest of what the program's code read from library modules while traced
    beyond what the key guards (`pcache._recording.read_guards`), described as the
    key's guards of library chains are (`library_value`: refused where the library
    may rebind the name)."""
    return digest(("module-reads", _guard_parts(guards, ContentWalker())))


def _settings() -> tuple[str, str]:
    """The digests of every JAX option and of the trace context, by name and
    canonical encoding; memoized by their values with exact types (`typed`)."""
    memo_key = (_compat.config_snapshot(), _compat.trace_context())
    got = _SETTINGS.get(memo_key)
    if got is not None:
        return got
    config = []
    for name, v in _compat.config_items():
        try:
            config.append((name, _canon.encode_env_value(name, v)))
        except Uncacheable:
            raise NoReuse(f"persist-config:{name}") from None
    context = tuple((n, _canonical(v, f"context:{n}")) for n, v in _compat.trace_context_items())
    got = (digest(("config", tuple(config))), digest(("context", context)))
    if len(_SETTINGS) > 64:
        _SETTINGS.clear()
    _SETTINGS[memo_key] = got
    return got


def _environment(ignore: tuple[str, ...] = ()) -> str:
    """The digest of what the process runs on, memoized by what can change in it:
    every environment variable but the session's and those ``ignore`` names
    (`_persist_env.keyed_environ`), the installed distributions (by ``sys.path``)."""
    import jax

    from pcache import _key

    _persist_env.check_unshadowed()
    backend = _compat.default_backend()
    _, env = _key.environment(backend)
    environ = _persist_env.keyed_environ(ignore)
    memo_key = (
        env,
        environ,
        HASH_SEED,
        tuple(sys.path),
        _persist_env.library_flags(),
        _user_code(),
        _persist_env.shadowing_files(),
        _persist_env.distributions(),  # (an install while the process runs: review 64)
    )
    got = _ENV.get(memo_key)
    if got is None:
        devices = tuple((d.id, d.process_index, d.platform, d.device_kind) for d in jax.devices())
        got = digest(
            (
                "environment",
                *memo_key[:3],
                memo_key[4],  # (absl flags)
                memo_key[5],  # (the user's modules)
                memo_key[6],  # (the user's files named like a library's)
                devices,
                _own_source(),
                sys.version,
                sys.implementation.cache_tag,
                sys.byteorder,
                _persist_env.distributions(),
                _persist_env.process_facts(),
            )
        )
        _ENV.clear()
        _ENV[memo_key] = got
    return got


def key_parts(fun, jit_info, signature, in_avals, ctx_mesh, env_ignore=()) -> tuple[tuple, tuple]:
    """The content key's named parts of a call trace reuse keys (`_trace._key_of`),
    and its walks; or `NoReuse` with why it cannot be persisted."""
    w = ContentWalker(addresses=True)
    rw = ContentWalker(addresses=True)
    ck = w.value(fun)
    parts = (
        ("callable", ck),
        ("jit_options", w.value(_compat.jit_info_key(jit_info, location=False))),
        ("signature", w.signature(signature)),
        ("avals", tuple(_canonical(a, "aval") for a in in_avals)),
        ("mesh", _canonical(ctx_mesh, "mesh")),
        ("registries", _registries(rw)),
        ("aliases", _guards.aliases(w, rw)),
    )
    guards, gw = _guards.guards_for(w.funcs + rw.funcs, (w, rw), rw.pins, walker=ContentWalker)
    config, context = _settings()  # (digests: memoized)
    parts += (
        ("addresses", (w.resolved(), rw.resolved())),  # (once w and rw are done)
        ("globals", _guard_parts(guards, gw)),
        ("config", config),
        ("context", context),
        ("host", _hoststate.host_state(klass=named, abc_token=False)),
        ("environment", _environment(env_ignore)),
    )
    return parts, (w, rw, gw)


def _registries(rw: ContentWalker) -> tuple:
    """`_guards.registry_key` by content (its epoch, a process-local count of
    registrations, dropped), and every registered pytree node type with its rules
    by content (review 38: ``register_static(complex)`` in one process only)."""
    user = _guards.registry_key(rw)[1:]
    if any(
        type(e) is tuple and e[:1] == ("overrides",) and e[1].startswith("local:") for e in user
    ):
        raise NoReuse("persist-overridden-rule")  # (a rule or handler that is not JAX's)
    rules = library_rules(library_primitive_name, digest, ContentWalker)
    return (*user, ("nodes", _pytree_nodes()), ("abcs", abc_registrations(named, digest)),
            ("library-rules", rules), ("added", _added()))  # fmt: skip


def _added() -> tuple:
    """Every entry of JAX's type-handler tables added since pcache read them, or
    replaced under a class (`_canon_rules.added`), described: which library class the
    program registers (``python_scalar_types_to_dtypes[L.F]`` after the library's API
    pointed ``F`` at its other class ``F``: review 159; an override's token names the
    class by its names alone: review 160) is told by a name its module's import bound
    it to and no code of that module rebinds."""
    out = []
    for table, k, v in _canon_rules.added():
        key, value = _canon_rules.describe(k, v)
        if is_a(k, type) and key is not None:
            _, qual, mod = names(k)
            if _resolve(mod, qual) is not k or not unchanged(mod, qual):
                key = None
            elif _rebinds(mod, qual, {_file(mod)}):
                key = None
        if None in (table, key, value):
            raise NoReuse("persist-added-handler")
        out.append((table, key, value))
    return tuple(sorted(out))


def _pytree_nodes() -> str:
    """The digest of every entry of JAX's pytree registry by content, memoized per
    registry state, and each entry's description per entry (its type and rules the
    same objects: a registration in a trace describes the one it adds)."""
    tree = _compat.pytree_registry()
    snapshot = tuple(tree.items())
    e = _NODES.get("nodes")
    if (
        e is not None
        and len(e[0]) == len(snapshot)
        and all(a[0] is b[0] and a[1] is b[1] for a, b in zip(e[0], snapshot, strict=True))
    ):
        return e[1]
    kept = _NODES.setdefault("entries", {})  # id(type) -> (type, entry, its description)
    out = []
    for t, entry in snapshot:
        got = kept.get(id(t))
        if got is None or got[0] is not t or got[1] is not entry:
            w = ContentWalker()
            w.registry = True  # (rules JAX made: `register_pytree_node_class`'s methodcaller)
            try:
                got = kept[id(t)] = (t, entry, (named(t), tuple(w.value(f) for f in entry)))
            except NoReuse as exc:
                raise NoReuse(f"persist-pytree-node:{qualname(t)}:{exc.reason}") from None
        out.append(got[2])
    enc = digest(("nodes", tuple(sorted(out, key=repr))))
    _NODES["nodes"] = (snapshot, enc)
    return enc


def digest(parts: tuple) -> str:
    return _packed(DOMAIN, parts)


def trace_key(
    fun, jit_info, signature, in_avals, ctx_mesh, env_ignore=()
) -> tuple[str, tuple, tuple]:
    """(the persisted key, its parts' digests by name, the walks that made it): the
    key is the digest of the named parts' digests (each part serialized once).
    ``env_ignore``: the environment variables the user says change nothing
    (`_persist_env.keyed_environ`)."""
    with one_look():  # (its walks run no program code: the indexes checked once)
        parts, walks = key_parts(fun, jit_info, signature, in_avals, ctx_mesh, env_ignore)
    named_digests = tuple((n, p if type(p) is str else digest((n, p))) for n, p in parts)
    return digest(("key", named_digests)), named_digests, walks


__all__ = [
    "ContentWalker",
    "DOMAIN",
    "code_digest",
    "digest",
    "key_parts",
    "library_name",
    "library_primitive",
    "library_primitive_name",
    "named",
    "resolve_name",
    "trace_key",
]
