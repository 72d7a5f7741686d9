"""The partition's classes against a brute force, through filters and forwarding elements.

Random elements get random actions on random regions, as the model's moves give them
(begin, a move per class the region meets, end; merges at the end of each update).
Elements that only ever apply one action are filters; the partition labels the classes by
their two projections while some filter has headers, and directly otherwise, and switches
between the two as elements gain a second action or filters lose all their headers. After
every update: the classes are exactly the sets of headers with the same owners at every
element (owners computed by replaying the assignments for concrete headers), classify
names the class that holds a header, and parts/candidates are exactly the classes that
meet a region.
"""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from cpc.partition import FILTER, FORWARDING, Partition
from cpc.space import HeaderSpace

SPACE = HeaderSpace()
DSTS = [0x0A000000 + (i << 6) for i in range(4)]  # four /26s of 10.0.0.0/24
SRCS = [0xC0A80000, 0xC0A80001]
PROTOS = [6, 17]
HEADERS = [
    {"eth_type": 0x0800, "ipv4_dst": d + 1, "ipv4_src": s, "ip_proto": p}
    for d, s, p in itertools.product(DSTS, SRCS, PROTOS)
]
ACTIONS = ["a", "b", "c"]  # interned strings: compared by identity, as the model's actions


def region(dst, src, proto):
    fields = [("eth_type", 0x0800, 0xFFFF)]
    if dst is not None:
        fields.append(("ipv4_dst", DSTS[dst], 0xFFFFFFC0))
    if src is not None:
        fields.append(("ipv4_src", SRCS[src], 0xFFFFFFFF))
    if proto is not None:
        fields.append(("ip_proto", PROTOS[proto], 0xFF))
    return SPACE.match_bdd(tuple(fields))


def inside(h, dst, src, proto):
    return (
        (dst is None or h["ipv4_dst"] & 0xFFFFFFC0 == DSTS[dst])
        and (src is None or h["ipv4_src"] == SRCS[src])
        and (proto is None or h["ip_proto"] == PROTOS[proto])
    )


assignment = st.tuples(
    st.integers(0, 4),  # element; 3 and 4 are given only one action (filters)
    st.one_of(st.none(), st.integers(0, 3)),
    st.one_of(st.none(), st.integers(0, 1)),
    st.one_of(st.none(), st.integers(0, 1)),
    st.one_of(st.none(), st.sampled_from(ACTIONS)),
)
# A filter losing all its headers: with no filter holding any, the classes are labelled
# directly again.
cleared = st.tuples(st.integers(3, 4), st.none(), st.none(), st.none(), st.none())


def apply(part, elem, dst, src, proto, key):
    """As cpc.model.Model._move: the classes the region meets, then begin, moves, end."""
    if elem >= 3 and key is not None:
        key = "permit"
    r = region(dst, src, proto)
    parts = part.begin(elem, r, key)
    try:
        for c, p, whole in parts:
            part.move(c, p, elem, key, whole)
    finally:
        part.end()
    return elem, dst, src, proto, key


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(assignment | cleared, min_size=1, max_size=3), min_size=1, max_size=12))
def test_classes_follow_the_owners_through_both_groups(updates):
    part = Partition(SPACE)
    done = []
    for update in updates:
        for a in update:
            done.append(apply(part, *a))
        moved, _, _ = part.drain()
        part.merge_alike(moved)
        part.drain()
        part.forget_changes()
        check(part, done)


def owners_of(h, done):
    out = {}
    for elem, dst, src, proto, key in done:
        if inside(h, dst, src, proto):
            if key is None:
                out.pop(elem, None)
            else:
                out[elem] = key
    return out


def check(part, done):
    by_owners = {}
    for h in HEADERS:
        by_owners.setdefault(frozenset(owners_of(h, done).items()), []).append(h)
    # Every header sits in the class with its owners, one class per owner set.
    seen = {}
    for key, hs in by_owners.items():
        for h in hs:
            c = part.classify(h)
            assert SPACE.contains(part.bdd_of[c], h)
            assert frozenset(part.owners[c].items()) == key
            seen.setdefault(key, c)
            assert seen[key] == c, "two classes with the same owners after a merge"
    # Two labels exactly while some filter holds headers of its own.
    assert part.factored == any(e not in part.group and part.actions(e) for e in range(5))
    # Classes are disjoint and cover the header space.
    union = SPACE.false
    for u in part.bdd_of.values():
        assert union & u == SPACE.false
        union = union | u
    assert union == SPACE.true
    # parts/candidates are exactly the classes that meet a region.
    for dst, src, proto in [(0, None, None), (None, 1, 0), (2, 0, None), (None, None, None)]:
        r = region(dst, src, proto)
        want = {c for c, u in part.bdd_of.items() if u & r != SPACE.false}
        assert set(part.candidates(r)) == want
        for group in (FORWARDING, FILTER):  # seen from either group's projections
            got = part.parts(r, group=group)
            assert {c for c, _, _ in got} == want
            assert set(part.candidates(r, group)) == want
            for c, p, whole in got:
                u = part.bdd_of[c]
                assert p is None or p == u & r
                assert whole == (u & r == u), "a class taken whole or in part wrongly"
    # What each element applies, and to which headers: the classes' owners say it, and the
    # replayed owners of every concrete header agree.
    for elem in range(5):
        want: dict = {}
        for c, owners in part.owners.items():
            k = owners.get(elem)
            if k is not None:
                want.setdefault(k, set()).add(c)
        got = {k: SPACE.union(rs) for k, rs in part.regions_by_action(elem).items()}
        assert got == {k: SPACE.union([part.bdd_of[c] for c in cs]) for k, cs in want.items()}
        assert part.actions(elem) == set(want)
        for k, cs in want.items():
            assert part.classes_with(elem, k) in (None, cs)
        for h in HEADERS:
            k = owners_of(h, done).get(elem)
            if k is not None:
                assert SPACE.contains(got[k], h)


def test_merge_alike_joins_two_classes_with_the_same_owners_in_either_labelling():
    """Moves keep one class per owner set; merge_alike is what joins two that a split left
    alike (a bulk load's moves, or a move that found no class to join), labelled directly
    or by two projections."""
    for with_filter in (False, True):
        part = Partition(SPACE)
        done = [apply(part, 0, 0, None, None, "a"), apply(part, 0, 1, None, None, "b")]
        if with_filter:
            done.append(apply(part, 3, None, 0, None, "permit"))
        moved, _, _ = part.drain()
        part.merge_alike(moved)
        part.drain()
        part.forget_changes()
        c = part.classify(HEADERS[0])
        assert part.factored == with_filter
        twin = part.split(c, part.bdd_of[c] & region(None, None, 0))
        assert part.owners[twin] == part.owners[c]
        part.merge_alike([twin])
        assert part.survivor(twin) == c and twin not in part.owners
        part.drain()
        part.forget_changes()
        check(part, done)
