"""cpc._walkc, the class walk's loops in C, against plain Python versions of the same loops
on random walks and tries: the same answers, the same memo, no reference leaked, and a
clear error for input that is not a walk."""

from __future__ import annotations

import sys
from collections import Counter
from itertools import product

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cpc._walkc import (
    entry_changes,
    memo_entries,
    merge_deps,
    pairs,
    same_objects,
    split_via,
    trie_add,
    trie_find,
)
from cpc.results import Hop
from cpc.walk import _LEAF, Link, Node, Outcome, SharedEntry, _trie_add


class FakeNode:
    """A shared suffix as split_via and pairs see it: the switches its paths visit and the
    egresses they reach."""

    def __init__(self, dpids, egresses=(), made=True):
        self._dpids = frozenset(dpids)
        self._eg = frozenset(egresses)
        self._egresses = self._eg if made else None  # as Node: made when first asked for

    def dpids(self):
        return self._dpids

    def egresses(self):
        if self._egresses is None:
            self._egresses = self._eg
        return self._egresses


def py_split_via(outcomes, links, entries, dpids, crosses):
    """WalkResult.split_via in Python, as it read before the loops moved to C."""
    whole = set()
    for node, ivs in entries:
        hit = crosses.get(node)
        if hit is None:
            hit = crosses[node] = not dpids.isdisjoint(node.dpids())
        if hit:
            whole.add(ivs[0][0][0])
    redo = {
        o.ingress
        for o in outcomes
        if o.ingress[0] not in whole and any(h.dpid in dpids for h in o.hops)
    }
    for ing, hops, _vp, _alt, node in links:
        if ing not in redo and ing[0] not in whole:
            hit = crosses.get(node)
            if hit is None:
                hit = crosses[node] = not dpids.isdisjoint(node.dpids())
            if hit or any(h.dpid in dpids for h in hops):
                redo.add(ing)
    if not redo and not whole:
        return whole, redo, outcomes, links, entries, []
    return (
        whole,
        redo,
        [o for o in outcomes if o.ingress[0] not in whole and o.ingress not in redo],
        [k for k in links if k.ingress[0] not in whole and k.ingress not in redo],
        [e for e in entries if e.ingresses[0][0][0] not in whole],
        [e for e in entries if e.ingresses[0][0][0] in whole],
    )


def py_pairs(outcomes, links, entries, whole, redo):
    """WalkResult.pairs in Python, as it read before the loop moved to C."""
    every = whole is None
    p = {
        (o.ingress, o.egress)
        for o in outcomes
        if o.kind == "egress" and (every or o.ingress[0] in whole or o.ingress in redo)
    }
    for ing, _hops, _vp, _alt, node in links:
        if every or ing[0] in whole or ing in redo:
            eg = node.egresses()
            if eg:
                p.update((ing, e) for e in eg)
    for node, ings in entries:
        if every or ings[0][0][0] in whole:
            eg = node.egresses()
            if eg:
                p.update(product([i for i, _ in ings], eg))
    return p


def py_trie_find(trie, owners):
    """cpc.walk._trie_find as it read in Python: depth-first, the first leaf found."""
    stack = [trie]
    while stack:
        for elem, by_action in stack.pop().items():
            if elem is _LEAF:
                return by_action
            nxt = by_action.get(owners.get(elem))
            if nxt is not None:
                stack.append(nxt)
    return None


SWITCHES = st.integers(1, 6)
PORTS = st.integers(1, 4)
INGRESS = st.tuples(SWITCHES, PORTS)
HOPS = st.lists(SWITCHES, max_size=3).map(lambda ds: tuple(Hop(d, 1, (), 2) for d in ds))


@st.composite
def walks(draw):
    nodes = [
        FakeNode(
            draw(st.sets(SWITCHES, max_size=4)),
            draw(st.sets(INGRESS, max_size=3)),
            draw(st.booleans()),
        )
        for _ in range(draw(st.integers(1, 5)))
    ]
    node = st.sampled_from(nodes)
    outcomes = [
        Outcome(
            ing,
            draw(st.sampled_from(["egress", "drop", "loop"])),
            draw(PORTS),
            hops or (Hop(ing[0], ing[1], (), 3),),
            0,
            0,
            False,
            "",
            0,
            None,
            None,
            False,
            (),
        )
        for ing, hops in draw(st.lists(st.tuples(INGRESS, HOPS), max_size=6))
    ]
    links = [
        Link(ing, hops, 0, False, n)
        for ing, hops, n in draw(st.lists(st.tuples(INGRESS, HOPS, node), max_size=8))
    ]
    entries = []
    for sw in draw(st.lists(SWITCHES, max_size=6)):  # a switch may have two entries
        ports = draw(st.lists(PORTS, min_size=1, max_size=3, unique=True))
        ivs = [((sw, p), 1 << p) for p in ports]
        entries.append(SharedEntry(draw(node), tuple(ivs) if draw(st.booleans()) else ivs))
    dpids = draw(st.frozensets(SWITCHES, max_size=3))
    # Some nodes already tested for these switches, as by an earlier class of the update.
    memo = {n: not dpids.isdisjoint(n.dpids()) for n in nodes if draw(st.booleans())}
    return outcomes, links, entries, dpids, memo


@settings(max_examples=300, deadline=None)
@given(walks())
def test_split_via_as_the_python_loop(walk):
    outcomes, links, entries, dpids, memo = walk
    c_memo, py_memo = dict(memo), dict(memo)
    got = split_via(outcomes, links, entries, dpids, c_memo)
    want = py_split_via(outcomes, links, entries, dpids, py_memo)
    assert got[:2] == want[:2]  # whole, redo
    for g, w in zip(got[2:], want[2:], strict=True):  # the same objects kept, in order
        assert [id(x) for x in g] == [id(x) for x in w]
    # A list kept whole is the walk's own (cpc.index.Dropped.paths relies on it), and only
    # then: a kept list is never one that lost paths.
    for g, mine in zip(got[2:5], (outcomes, links, entries), strict=True):
        assert (g is mine) == (len(g) == len(mine))
    assert c_memo == py_memo


@settings(max_examples=300, deadline=None)
@given(walks(), st.booleans())
def test_pairs_as_the_python_loop(walk, every):
    outcomes, links, entries, dpids, memo = walk
    if every:
        got = pairs(outcomes, links, entries, None, frozenset())
        assert type(got) is frozenset  # kept by the walk as it is (WalkResult.pair_set)
        assert got == py_pairs(outcomes, links, entries, None, frozenset())
        return
    # The paths that a re-walk via dpids drops: what the daemon asks for after an update.
    whole, redo, *_ = py_split_via(outcomes, links, entries, dpids, dict(memo))
    got = pairs(outcomes, links, entries, whole, redo)
    assert got == py_pairs(outcomes, links, entries, whole, redo)


@st.composite
def tries(draw):
    elems = st.integers(0, 5)
    acts = st.sampled_from(["a", "b", None])
    trie: dict = {}
    stored = []
    for _ in range(draw(st.integers(0, 8))):
        path = draw(st.lists(elems, max_size=4, unique=True))
        actions = tuple(draw(acts) for _ in path)
        node = object()
        _trie_add(trie, tuple(path), actions, node)
        stored.append(node)
    owners = draw(st.dictionaries(elems, st.sampled_from(["a", "b"]), max_size=6))
    return trie, owners


@settings(max_examples=300, deadline=None)
@given(tries())
def test_trie_find_as_the_python_search(case):
    trie, owners = case
    assert trie_find(trie, owners, _LEAF) is py_trie_find(trie, owners)


def py_trie_add(trie: dict, elems: tuple, actions: tuple, node) -> None:
    """cpc.walk._trie_add as it read in Python."""
    for elem, act in zip(elems, actions, strict=True):
        trie = trie.setdefault(elem, {}).setdefault(act, {})
    trie.setdefault(_LEAF, node)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.lists(st.tuples(st.integers(0, 5), st.sampled_from(["a", "b", None])), max_size=5),
        max_size=8,
    )
)
def test_trie_add_as_the_python_loop(paths):
    """The same trie, node for node (the first node stored under a path stays)."""
    got: dict = {}
    want: dict = {}
    nodes = [object() for _ in paths]
    for path, node in zip(paths, nodes, strict=True):
        elems, actions = tuple(e for e, _ in path), tuple(a for _, a in path)
        trie_add(got, elems, actions, node, _LEAF)
        py_trie_add(want, elems, actions, node)
    assert got == want


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(st.integers(0, 9), st.sampled_from("abc")),
    st.lists(st.tuples(st.integers(0, 9), st.sampled_from("abc")), max_size=8),
)
def test_merge_deps_as_dict_update(frame, deps):
    elems, actions = tuple(e for e, _ in deps), tuple(a for _, a in deps)
    want = dict(frame)
    want.update(zip(elems, actions, strict=True))
    merge_deps(frame, elems, actions)
    assert frame == want and list(frame) == list(want)  # the same order of first insertion


def test_trie_add_and_merge_deps_refuse_unequal_lengths():
    with pytest.raises(ValueError):
        trie_add({}, (1, 2), ("a",), object(), _LEAF)
    with pytest.raises(ValueError):
        merge_deps({}, (1,), ())


def test_a_stored_node_is_found_by_its_own_actions():
    trie: dict = {}
    a, b = object(), object()
    _trie_add(trie, (1, 2), ("x", "y"), a)
    _trie_add(trie, (1, 3), ("z", None), b)
    assert trie_find(trie, {1: "x", 2: "y"}, _LEAF) is a
    assert trie_find(trie, {1: "z"}, _LEAF) is b  # element 3 without an action: None
    assert trie_find(trie, {1: "x", 2: "z"}, _LEAF) is None


def test_no_reference_is_leaked():
    node = FakeNode({1})
    link = Link((2, 1), (Hop(2, 1, (), 3),), 0, False, node)
    entry = SharedEntry(node, ((((1, 1)), 2),))
    outcomes, links, entries = [], [link], [entry]
    memo = {node: True}
    trie: dict = {}
    leaf = object()
    _trie_add(trie, (1,), ("x",), leaf)
    node._egresses = frozenset({(5, 5)})
    objs = (node, link, entry, outcomes, links, entries, leaf, node._egresses)
    before = [sys.getrefcount(x) for x in objs]
    for _ in range(1000):
        split_via(outcomes, links, entries, frozenset({1}), memo)
        split_via(outcomes, links, entries, frozenset({9}), {})
        trie_find(trie, {1: "x"}, _LEAF)
        trie_add(trie, (1,), ("x",), leaf, _LEAF)
        merge_deps(memo, (node,), (True,))
        assert len(pairs(outcomes, links, entries, None, frozenset())) == 2
        pairs(outcomes, links, entries, {1}, {(2, 1)})
    after = [sys.getrefcount(x) for x in objs]
    assert after == before


def py_entry_changes(old, new):
    """entry_changes in Python: (by, old_rest, new_rest)."""
    by, fresh, used = {}, {}, set()
    for i, e in enumerate(new):
        fresh.setdefault(id(e.ingresses), i)
    old_rest = []
    for e in old:
        i = fresh.get(id(e.ingresses))
        if i is None or i in used:
            old_rest.append(e)
            continue
        used.add(i)
        changed = e.node.egresses() ^ new[i].node.egresses()
        if changed:
            by.setdefault(id(e.ingresses), (e.ingresses, set()))[1].update(changed)
    return by, old_rest, [e for i, e in enumerate(new) if i not in used]


@st.composite
def entry_pairs(draw):
    """Two walks' shared entries over a few ingress lists and nodes, in any order."""
    lists = [tuple((((d, p)), 1) for p in range(draw(st.integers(1, 3)))) for d in range(4)]
    nodes = [FakeNode({1}, draw(st.sets(st.integers(0, 5), max_size=4))) for _ in range(4)]

    def side():
        idx = draw(st.lists(st.integers(0, 3), max_size=5))
        return [SharedEntry(draw(st.sampled_from(nodes)), lists[i]) for i in idx]

    return side(), side()


@settings(max_examples=300, deadline=None)
@given(entry_pairs())
def test_entry_changes_as_the_python_loop(case):
    old, new = case
    by, old_rest, new_rest = {}, [], []
    entry_changes(old, new, by, old_rest, new_rest)
    want_by, want_old, want_new = py_entry_changes(old, new)
    assert by == want_by
    assert [id(e) for e in old_rest] == [id(e) for e in want_old]
    assert [id(e) for e in new_rest] == [id(e) for e in want_new]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 5)), st.lists(st.integers(0, 5)))
def test_same_objects_counts_identities(a, b):
    objs = [object() for _ in range(6)]
    la, lb = [objs[i] for i in a], [objs[i] for i in b]
    assert same_objects(la, lb) == (Counter(map(id, la)) == Counter(map(id, lb)))
    assert same_objects(la, list(reversed(la)))
    assert not same_objects([(1, 2)], [(1, 2)][:0] + [tuple([1, 2])])  # equal, not the same


class FakeElement:
    idx = 4


def test_memo_entries_leak_no_reference():
    """One switch entered through a stored node, its shared entry kept in the cache."""
    hop = Hop(1, 3, (), 2)
    node = Node([], [Link((1, None), (hop,), 0, False, Node([], []))], elems=(4,), deps=("x",))
    node.groups = frozenset({(1, 7)})
    trie: dict = {}
    _trie_add(trie, (4,), ("x",), node)
    ivs = (((1, 1), 2),)
    xmemo, elements = {(1, None, "x"): trie}, {(1, 0, None): FakeElement()}
    edge_groups, cache, owners = {1: (ivs, frozenset({1}))}, {}, {4: "x"}
    args = ([1], owners, xmemo, elements, edge_groups, frozenset(), cache, _LEAF, SharedEntry)
    entries, groups = memo_entries(*args)
    assert entries == [SharedEntry(node, ivs)] and groups == {(1, 7)}
    objs = (node, trie, ivs, owners, cache[node], *args)
    before = [sys.getrefcount(x) for x in objs]
    for _ in range(1000):
        assert memo_entries(*args)[0][0] is cache[node]
        owners[4] = "y"  # no stored node for this action: the Python walk does it
        assert memo_entries(*args) is None
        owners[4] = "x"
    assert [sys.getrefcount(x) for x in objs] == before


def test_entry_changes_leak_no_reference():
    a, b = FakeNode({1}, {(3, 1)}), FakeNode({1}, {(3, 2)})
    ivs = (((1, 1), 2),)
    old, new = [SharedEntry(a, ivs)], [SharedEntry(b, ivs), SharedEntry(a, ((((2, 1)), 2),))]
    objs = (a, b, ivs, *old, *new, a._egresses, b._egresses)
    before = [sys.getrefcount(x) for x in objs]
    for _ in range(1000):
        by, old_rest, new_rest = {}, [], []
        entry_changes(old, new, by, old_rest, new_rest)
        assert by[id(ivs)][1] == {(3, 1), (3, 2)} and len(new_rest) == 1
        assert same_objects(new, list(reversed(new)))
    del by, old_rest, new_rest
    assert [sys.getrefcount(x) for x in objs] == before


def test_input_that_is_not_a_walk_is_an_error():
    with pytest.raises(TypeError, match="tuple or a list"):
        entry_changes([42], [], {}, [], [])  # not an entry
    with pytest.raises(IndexError):
        entry_changes([], [(FakeNode({1}),)], {}, [], [])  # an entry without ingresses
    with pytest.raises(TypeError):
        same_objects((1,), [1])
    with pytest.raises(TypeError, match="set or a frozenset"):
        memo_entries([1], {}, {}, {}, {}, [1], {}, _LEAF, SharedEntry)
    with pytest.raises(TypeError, match="set or a frozenset"):
        split_via([], [], [], [1, 2], {})
    with pytest.raises(TypeError, match="tuple or a list"):
        split_via([], [], [SharedEntry(FakeNode({1}), {1: 2})], frozenset({1}), {})
    with pytest.raises(IndexError):
        split_via([], [], [SharedEntry(FakeNode({1}), ())], frozenset({1}), {})
    with pytest.raises(TypeError, match="sets or frozensets"):
        pairs([], [], [], [1], set())
    with pytest.raises(IndexError):
        pairs([], [], [SharedEntry(FakeNode({1}), ())], {1}, set())
    no_hops = Outcome((1, 1), "egress", 2, (), 0, 0, False, "", 0, None, None, False, ())
    with pytest.raises(IndexError):
        pairs([no_hops], [], [], None, frozenset())
    with pytest.raises(AttributeError):  # a link's node must be a walk's node
        pairs([], [Link((1, 1), (), 0, False, object())], [], None, frozenset())
    with pytest.raises(TypeError, match="trie level"):
        trie_find({1: "not a level"}, {1: "x"}, _LEAF)
