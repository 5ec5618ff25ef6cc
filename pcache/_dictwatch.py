"""Whether dicts were written since they were last looked at, without reading them.

The hit path asks, on every call, whether JAX's rule and handler tables,
``sys.modules`` and ``copyreg``'s dispatch table still hold what they held (about
1300 entries in 50 dicts): comparing every key and value by identity costs tens of
microseconds a call. CPython 3.11 to 3.13 keep a version tag in every dict (PEP
509's ``ma_version_tag``, just after the dict's size in its struct): each write
(an item set to another object, added, deleted, popped, cleared, merged) gives it
the next value of one process-wide counter, so a dict whose tag is unchanged was
not written. The tag is read through ``ctypes`` from the dict's own memory, after
`_probe` proved, once per process, that the struct is laid out as assumed and that
every kind of write moves the tag; anywhere else (another interpreter, another
version, a failed probe) every key and value is compared by identity instead.
Either way no ``__eq__`` runs and nothing is allocated per entry.

JAX-free.
"""

from __future__ import annotations

import ctypes
import itertools
import operator
import sys
import threading
from collections.abc import Callable
from typing import Any

_OFFSET = 2 * ctypes.sizeof(ctypes.c_void_p)  # (after the refcount and the type)


def _cell(d: dict, field: int) -> Any:
    cls = ctypes.c_ssize_t if field == 0 else ctypes.c_uint64
    return cls.from_address(id(d) + _OFFSET + field * ctypes.sizeof(ctypes.c_ssize_t))


def _probe() -> bool:
    """Whether this interpreter's dicts carry a version tag that every write moves."""
    if sys.implementation.name != "cpython" or not (3, 11) <= sys.version_info[:2] <= (3, 13):
        return False
    if ctypes.sizeof(ctypes.c_ssize_t) != ctypes.sizeof(ctypes.c_uint64):
        return False
    d: dict = {}
    used, tag = _cell(d, 0), _cell(d, 1)

    class Obj:  # (an attribute written through the interpreter's specialized stores)
        pass

    o = Obj()
    o.a = 0
    writes = [
        lambda: d.__setitem__("a", 1),
        lambda: d.__setitem__("a", 2),
        lambda: d.__setitem__("b", 3),
        lambda: d.__delitem__("b"),
        lambda: d.update({"c": 4}),
        lambda: d.setdefault("e", 5),
        lambda: d.pop("e"),
        lambda: d.popitem(),
        lambda: d.__ior__({"f": 6}),
        lambda: d.clear(),
        lambda: d.update({"g": 7, "h": 8}),
        lambda: dict.__init__(d, i=9),
    ]
    od = vars(o)
    otag = _cell(od, 1)
    for i in range(40):  # (enough for the interpreter to specialize the store)
        before = otag.value
        o.a = i + 1
        if otag.value == before or _cell(od, 0).value != len(od):
            return False
    for write in writes:
        before = tag.value
        write()
        if tag.value == before or used.value != len(d):
            return False
    return True


_TAGGED = _probe()


class Watch:
    """Answers `unchanged` for one tuple of dicts at a time (holding them alive, so
    their memory stays theirs). Not thread-safe: a watch that vouches for work done
    on a False answer is asked under the lock of that work (`Derived`), else through
    `still` only."""

    def __init__(self) -> None:
        self._dicts: tuple = ()
        self._cells: tuple = ()
        self._last: Any = None

    def unchanged(self, dicts: tuple) -> bool:
        """Whether ``dicts`` are the very dicts of the last call, in order, and none
        of them was written since (a write of an equal or even the same value may
        count as a change); a False answer makes ``dicts`` the ones watched, as
        they are now."""
        if self.still(dicts):
            return True
        self.start(dicts)
        return False

    def still(self, dicts: tuple) -> bool:
        """`unchanged`, changing nothing (for a watch other threads read: one
        published after the work it vouches for, never updated)."""
        if self._last is None:
            return False
        if dicts is not self._dicts:  # (the very tuple given last: the same dicts)
            if len(dicts) != len(self._dicts) or not all(map(operator.is_, dicts, self._dicts)):
                return False
        now = self._read()
        return now == self._last if _TAGGED else _same_entries(now, self._last)

    def start(self, dicts: tuple) -> None:
        """Watch ``dicts`` from now on, as they are now."""
        self._dicts = tuple(dicts)
        self._cells = tuple(_cell(d, 1) for d in dicts) if _TAGGED else ()
        self._last = self._read()

    def _read(self) -> Any:
        if _TAGGED:
            return tuple(map(_VALUE, self._cells))
        dicts = self._dicts
        return (
            tuple(map(len, dicts)),
            tuple(itertools.chain.from_iterable(dicts)),
            tuple(itertools.chain.from_iterable(map(dict.values, dicts))),
        )

    def clear(self) -> None:
        self._dicts, self._cells, self._last = (), (), None

    def __len__(self) -> int:  # (dicts watched: a registered memo's size)
        return len(self._dicts)


class Derived:
    """A value computed from some dicts (``dicts()``, then ``compute()``), computed
    again only when one of them was written."""

    def __init__(self, dicts: Callable[[], tuple], compute: Callable[[], Any]) -> None:
        self._dicts, self._compute = dicts, compute
        self._watch = Watch()
        self._value: Any = None
        self.lock = threading.RLock()  # (no thread reads a value another is computing)

    def __call__(self) -> Any:
        with self.lock:
            if not self._watch.unchanged(self._dicts()):
                self._value = self._compute()
            return self._value

    def clear(self) -> None:
        self._watch.clear()
        self._value = None

    def __len__(self) -> int:
        return len(self._watch)


def tag(d: dict) -> int | None:
    """``d``'s version tag, which every write of it moves, where `_probe` proved one
    (else None)."""
    return _cell(d, 1).value if _TAGGED else None


def version(d: dict) -> Any:
    """A token that changes with every write of ``d``: its version tag where `_probe`
    proved one, else its size (which misses a key replaced by another: callers say
    so)."""
    return _cell(d, 1).value if _TAGGED else len(d)


DELETED = object()  # (an entry an `Overrides` found removed)


class Overrides:
    """The entries of some dicts that differ from what those dicts held when first
    seen here: a value replaced (by any object but the very one), a key removed, or
    a key added that some dict held already when last looked at (review 94: JAX's
    handler for ``int`` put under ``np.float32`` in a table without it). Any other
    key added later is a first registration (a module imported later registers the
    rules of its new primitives), taken into the baseline, unless ``fresh(key)`` says
    no key of its kind ever is one. Never forgotten: the baseline is what the process
    held when pcache first looked. Thread-safe."""

    def __init__(self, fresh: Callable[[Any], bool] = lambda key: True) -> None:
        self._base: dict[int, tuple[dict, dict]] = {}  # id -> (dict, its baseline)
        self._first: dict[int, dict] = {}  # id -> what the dict held when first seen
        self._known: dict[int, Any] = {}  # id -> every key any dict held (alive)
        self._fresh = fresh
        self._watch = Watch()
        self._now: tuple = ()
        self.version = 0  # (one more each time the dicts were read again)
        self.lock = threading.RLock()
        #: whether this read is one a first registration is proven by (`attested`)
        self.attesting = False
        #: ``(dict, key)`` of each first registration (or dict first seen) taken into
        #: the baseline after the first read by a read no `attested` made
        self.unattested: list = []
        self._approved: list = []  # (what the running `attested` read proved)
        self._proven: dict = {}  # id(dict) -> id(key) -> (key, value) proved

    def __call__(self, dicts: tuple) -> tuple:
        """``((dict, key, value or DELETED), ...)``, every entry overridden now."""
        with self.lock:
            if self._watch.unchanged(dicts):
                return self._now
            out: list = []
            known, new = self._known, []
            for d in dicts:
                cur = dict.copy(d)  # (in C: no other thread's write mid-way)
                new += cur
                e = self._base.get(id(d))
                if e is None or e[0] is not d:
                    self._base[id(d)] = (d, cur)
                    self._first[id(d)] = dict.copy(cur)
                    if self.version:
                        (self._approved if self.attesting else self.unattested).extend(
                            (d, k) for k in cur
                        )
                    continue
                base = e[1]
                for k, v in cur.items():
                    b = base.get(k, DELETED)
                    if b is not DELETED:
                        if b is not v:
                            out.append((d, k, v))
                    elif id(k) not in known and self._fresh(k):
                        base[k] = v  # (a first registration)
                        (self._approved if self.attesting else self.unattested).append((d, k))
                    else:
                        out.append((d, k, v))  # (kept out of the baseline while held)
                out += [(d, k, DELETED) for k in base if k not in cur]
            known.update(zip(map(id, new), new, strict=True))  # (after all: one module's new keys)
            self._now = tuple(out)
            self.version += 1
            return self._now

    def attested(self, dicts: tuple) -> list:
        """Read ``dicts`` now, each entry added since the last read a first
        registration proven (made by the import that just finished, a read having
        been made as it began: `pcache._canon_rules.imported`); ``(dict, key)`` of
        each (`unattest` takes them back). Only after a first read."""
        with self.lock:
            if not self.version:
                return []
            self.attesting, self._approved = True, []
            try:
                self(dicts)
            finally:
                self.attesting = False
            for d, k in self._approved:
                self._proven.setdefault(id(d), {})[id(k)] = (k, self._base[id(d)][1].get(k))
            return self._approved

    def proven(self, d: dict, k: Any, v: Any) -> bool:
        """Whether ``d[k]`` is ``v``, the very entry an `attested` read proved."""
        with self.lock:
            e = self._proven.get(id(d), {}).get(id(k))
            return e is not None and e[0] is k and e[1] is v

    def unattest(self, entries: list) -> None:
        """What an `attested` read proved, taken back (program code ran meanwhile)."""
        with self.lock:
            self.unattested.extend(entries)
            for d, k in entries:
                self._proven.get(id(d), {}).pop(id(k), None)

    def added(self, d: dict) -> list:
        """``(key, value)`` of every entry ``d`` holds now under a key it did not
        hold when first seen (after a call that saw it)."""
        with self.lock:
            first = self._first.get(id(d))
            if first is None or self._base[id(d)][0] is not d:
                return []
            return [(k, v) for k, v in dict.copy(d).items() if k not in first]

    def first_seen(self, d: dict) -> dict:
        """What ``d`` held when first seen (empty if never seen)."""
        with self.lock:
            e = self._base.get(id(d))
            return self._first[id(d)] if e is not None and e[0] is d else {}


_VALUE = operator.attrgetter("value")


def _same_entries(a: tuple, b: tuple) -> bool:
    """Two `Watch._read` snapshots (sizes, keys, values) by identity, never ``==``."""
    return a[0] == b[0] and all(
        len(x) == len(y) and all(map(operator.is_, x, y)) for x, y in zip(a[1:], b[1:], strict=True)
    )


def tag_cells(dicts: tuple) -> tuple:
    """What reads the version tags of ``dicts`` (`read_tags`), made once and read
    often (the caller keeps the dicts alive); () where there are no tags."""
    return tuple(_cell(d, 1) for d in dicts) if _TAGGED else ()


def read_tags(cells: tuple) -> tuple:
    return tuple(map(_VALUE, cells))


def tagged() -> bool:
    """Whether dicts' version tags are read (else every entry is compared)."""
    return _TAGGED


__all__ = ["DELETED", "Derived", "Overrides", "Watch", "tagged"]
