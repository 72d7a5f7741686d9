"""HeaderSpace operations against their plain dd equivalents."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from cpc.fields import PREFIX_MASKS as PREFIX
from cpc.partition import Partition
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
    part = Partition(SPACE)
    for pfx, port in cuts:  # split every class the region cuts
        r = region(pfx, port)
        for ap in list(part.bdd_of):
            p = part.bdd_of[ap] & r
            if p != SPACE.false and p != part.bdd_of[ap]:
                part.split(ap, p)
    q = region(*query)
    want = SPACE.bdd.exist(SPACE.header_names, part.label & q)
    assert SPACE.exists_and(part.label, q) == want
    # and the classes it names are those whose headers meet q
    assert sorted(part._candidates(q)) == sorted(
        ap for ap, u in part.bdd_of.items() if u & q != SPACE.false
    )


def test_cubes_of_other_variables_still_work():
    u = SPACE.bdd.cube({"ipv4_dst_0": True, "cls_3": False})
    assert u == SPACE.bdd.var("ipv4_dst_0") & ~SPACE.bdd.var("cls_3")
