"""HeaderSpace operations against their plain dd equivalents."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from cpc.fields import PREFIX_MASKS as PREFIX
from cpc.partition import Labels
from cpc.space import HeaderSpace

SPACE = HeaderSpace()

prefixes = st.tuples(st.integers(0, 2**32 - 1), st.integers(0, 32))
ports = st.tuples(st.integers(0, 65535), st.sampled_from([0xFFFF, 0xFF00, 0xF000, 0]))


def region(pfx, port):
    (value, n), (tp, tp_mask) = pfx, port
    fields = [("ipv4_dst", value & PREFIX[n], PREFIX[n]), ("eth_type", 0x0800, 0xFFFF)]
    if tp_mask:
        fields[1:1] = [("ip_proto", 6, 0xFF), ("tp_dst", tp & tp_mask, tp_mask)]
    return SPACE.match_bdd(tuple(fields))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(prefixes, ports), min_size=1, max_size=12), st.tuples(prefixes, ports))
def test_exists_and_equals_exist_of_the_conjunction(cuts, query):
    labels = Labels(SPACE)
    first = labels._new_id()
    labels.label = labels._cube_of(first)
    regions = {first: SPACE.true}
    for pfx, port in cuts:  # split every region the cut meets
        r = region(pfx, port)
        for ident in list(regions):
            p = regions[ident] & r
            if p != SPACE.false and p != regions[ident]:
                new = labels._new_id()
                regions[new], regions[ident] = p, regions[ident] & ~p
                labels._relabel(p, new)
    q = region(*query)
    want = SPACE.bdd.exist(SPACE.header_names, labels.label & q)
    assert SPACE.exists_and(labels.label, q) == want
    # and the ids it names are those whose headers meet q
    assert sorted(labels._candidates(q)) == sorted(
        i for i, u in regions.items() if u & q != SPACE.false
    )


def test_cubes_of_other_variables_still_work():
    u = SPACE.bdd.cube({"ipv4_dst_0": True, "cls_3": False})
    assert u == SPACE.bdd.var("ipv4_dst_0") & ~SPACE.bdd.var("cls_3")


def test_pick_returns_a_header_of_the_set_or_none():
    """pick() is one descent: on random unions of masked cubes and their complements, it
    returns a member (checked with contains) exactly when the set is not empty."""
    import random

    s = HeaderSpace()
    rng = random.Random(1)
    fields = [("ipv4_dst", 32), ("tp_dst", 16), ("eth_src", 48), ("vlan_vid", 13)]
    for _ in range(300):
        u = s.false
        for _ in range(rng.randint(1, 4)):
            c = s.true
            for f, w in fields:
                if rng.random() < 0.6:
                    c &= s.field_bdd(f, rng.getrandbits(w), rng.getrandbits(w))
            u |= ~c if rng.random() < 0.3 else c
        h = s.pick(u)
        assert (h is None) == (u == s.false)
        if h is not None:
            assert s.contains(u, h), h
