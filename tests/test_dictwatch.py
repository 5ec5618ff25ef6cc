"""`pcache._dictwatch`: a dict written since it was last looked at is always seen as
written, by CPython's version tags and by the identity comparison used elsewhere.
Real dicts, real writes; no JAX."""

from __future__ import annotations

import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pcache import _dictwatch


@pytest.fixture(params=["tagged", "compared"])
def mode(request, monkeypatch):
    if request.param == "tagged" and not _dictwatch.tagged():
        pytest.skip("no dict version tags on this interpreter")
    monkeypatch.setattr(_dictwatch, "_TAGGED", request.param == "tagged")
    return request.param


def test_version_tags_are_read_where_cpython_keeps_them():
    cpython = sys.implementation.name == "cpython"
    assert _dictwatch.tagged() == (cpython and (3, 11) <= sys.version_info[:2] <= (3, 13))


F, G = (lambda: 1), (lambda: 2)
WRITES = {
    "set a new key": lambda d: d.__setitem__("new", F),
    "set another value": lambda d: d.__setitem__("a", G),
    "delete": lambda d: d.__delitem__("a"),
    "pop": lambda d: d.pop("b"),
    "popitem": lambda d: d.popitem(),
    "clear": lambda d: d.clear(),
    "update": lambda d: d.update({"z": G}),
    "setdefault": lambda d: d.setdefault("y", F),
    "in-place or": lambda d: d.__ior__({"x": F}),
    # the same value under another key, in the place of the last one (same size, same
    # values in the same order: only the keys tell)
    "another key, same values": lambda d: (d.pop("c"), d.__setitem__("c2", F)),
}


@pytest.mark.parametrize("write", sorted(WRITES))
def test_every_kind_of_write_is_seen(mode, write):
    others = ({1: F}, {})
    d = {"a": F, "b": G, "c": F}
    w = _dictwatch.Watch()
    dicts = (others[0], d, others[1])
    assert not w.unchanged(dicts)  # (first sight)
    assert w.unchanged(dicts)
    WRITES[write](d)
    assert not w.unchanged(dicts)
    assert w.unchanged(dicts)


def test_other_dicts_are_a_change(mode):
    a, b = {1: F}, {1: F}
    w = _dictwatch.Watch()
    w.unchanged((a,))
    assert not w.unchanged((b,))  # (equal, but not the same dict)
    assert not w.unchanged((b, a))
    assert w.unchanged((b, a))


def test_derived_is_computed_again_only_after_a_write(mode):
    d: dict = {}
    calls = []
    derived = _dictwatch.Derived(lambda: (d,), lambda: calls.append(len(d)) or len(d))
    assert (derived(), derived()) == (0, 0)
    d["k"] = 1
    assert (derived(), derived()) == (1, 1)
    assert calls == [0, 1]
    derived.clear()
    assert derived() == 1 and calls == [0, 1, 1]


OPS = st.lists(
    st.tuples(
        st.sampled_from(["set", "del", "pop", "clear", "update", "same"]),
        st.integers(0, 4),
        st.integers(0, 2),
    ),
    max_size=12,
)


@settings(max_examples=200, deadline=None)
@given(OPS)
def test_any_change_of_keys_or_values_is_never_unchanged(ops):
    values = (F, G, object())
    for tagged in {False, _dictwatch.tagged()}:
        _dictwatch._TAGGED, saved = tagged, _dictwatch._TAGGED
        try:
            d = {k: values[k % 3] for k in range(3)}
            w = _dictwatch.Watch()
            w.unchanged((d,))
            for op, k, v in ops:
                before = (tuple(d), tuple(d.values()))
                if op == "set":
                    d[k] = values[v]
                elif op == "del":
                    d.pop(k, None)
                elif op == "pop" and d:
                    d.popitem()
                elif op == "clear":
                    d.clear()
                elif op == "update":
                    d.update({k: values[v], k + 5: values[(v + 1) % 3]})
                elif op == "same" and k in d:
                    d[k] = d[k]  # (no change: may or may not count as one)
                after = (tuple(d), tuple(d.values()))
                same = len(before[0]) == len(after[0]) and all(
                    x is y for x, y in zip(before[0] + before[1], after[0] + after[1], strict=True)
                )
                if w.unchanged((d,)):
                    assert same, (op, k, v)
        finally:
            _dictwatch._TAGGED = saved


def test_still_answers_without_taking_the_write_as_seen(mode):
    """`Watch.still` (what other threads ask of a published watch) stays False after
    a write until the watch is started again; `unchanged` takes the write as seen."""
    d = {"a": F}
    w = _dictwatch.Watch()
    assert not w.still((d,))  # (nothing watched yet)
    w.start((d,))
    assert w.still((d,))
    d["b"] = G
    assert not w.still((d,)) and not w.still((d,))
    assert not w.unchanged((d,))
    assert w.still((d,)) and w.unchanged((d,))


def test_overrides_are_told_from_first_registrations(mode):
    """`Overrides`: a value replaced (even by an equal object) or a key removed is an
    override for good; a key added later is a first registration; putting the first
    value back undoes the override."""
    d = {"a": F}
    later: dict = {}
    over = _dictwatch.Overrides()
    assert over((d,)) == ()  # (the baseline)
    d["b"] = G  # (a first registration)
    assert over((d,)) == ()
    d["a"] = G
    assert over((d,)) == ((d, "a", G),)
    del d["b"]
    assert sorted((k, v is G) for _, k, v in over((d,))) == [("a", True), ("b", False)]
    assert [v for _, k, v in over((d,)) if k == "b"] == [_dictwatch.DELETED]
    d["a"], d["b"] = F, G
    assert over((d,)) == ()
    assert over((d, later)) == ()  # (a table first seen now: its baseline)
    later["k"] = F
    assert over((d, later)) == ()
    later["k"] = G
    assert over((d, later)) == ((later, "k", G),)


def test_overrides_tell_what_was_added_after_first_sight(mode):
    d = {"a": F}
    over = _dictwatch.Overrides()
    assert over.added(d) == [] and over.first_seen(d) == {}  # (never seen)
    over((d,))
    d["b"] = G
    over((d,))
    assert over.added(d) == [("b", G)] and over.first_seen(d) == {"a": F}
    v = over.version
    over((d,))
    assert over.version == v  # (nothing written: not read again)


def test_a_key_another_table_held_added_later_is_an_override(mode):
    """Review 94: a key added to a table after its first sight is a first
    registration only if no table held it when last looked at (JAX's own handler for
    ``int`` put under ``np.float32`` in a table that held none), and only if
    ``fresh`` allows keys of its kind; new keys added to several tables at once (a
    module's new primitive) are first registrations in each."""
    a, b = {"x": F}, {"y": F}
    over = _dictwatch.Overrides()
    assert over((a, b)) == ()
    b["x"] = G  # ("x" was a's: an override, while held)
    assert over((a, b)) == ((b, "x", G),)
    a["new"], b["new"] = F, G  # (one write's new key in both tables)
    assert over((a, b)) == ((b, "x", G),)
    del b["x"]
    assert over((a, b)) == ()
    b["x"] = F  # (still an override: never taken into b's baseline)
    assert over((a, b)) == ((b, "x", F),)
    typed = _dictwatch.Overrides(fresh=lambda key: type(key) is not type)
    c: dict = {int: F}
    typed((c,))
    c[float], c["s"] = G, G  # (no type is ever new: float is an override)
    assert typed((c,)) == ((c, float, G),)
