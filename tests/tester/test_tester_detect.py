"""Algorithm 3 on hand-built hops: detection, classification, localization."""

from __future__ import annotations

from tester_helpers import ALL_PORTS, GOOD, R1, R2, R3, R4, expected, path, rule, tags_of

from tester.detect import (
    TYPE_A,
    TYPE_P_ACTION,
    TYPE_P_MATCH,
    Alternatives,
    compare,
    compare_hop,
    first_missing_hop,
)


def test_consistent() -> None:
    alts = Alternatives([expected(GOOD)])
    assert compare(alts, *tags_of(GOOD), ALL_PORTS) is None


def test_misroute_localized_to_predecessor() -> None:
    # s1 sends out port 3 to s4, which forwards to s3: s2 is missing, s1 misrouted.
    actual = path((1, 1, 3, R1), (4, 1, 2, R4), (3, 3, 2, R3))
    v = compare(Alternatives([expected(GOOD)]), *tags_of(actual), ALL_PORTS)
    assert v.kind == TYPE_P_ACTION and v.culprit == 1 and v.missing_hop == 1
    assert v.candidates[0] == 1


def test_misroute_at_second_hop() -> None:
    # s2 outputs on port 3 to s4, which forwards to s3.
    actual = path((1, 1, 2, R1), (2, 1, 3, R2), (4, 2, 2, R4), (3, 3, 2, R3))
    v = compare(Alternatives([expected(GOOD)]), *tags_of(actual), ALL_PORTS)
    assert v.kind == TYPE_P_ACTION and v.culprit == 2 and v.location == "dpid:2"


def test_same_rules_parallel_link() -> None:
    # s1 outputs on port 4 (a parallel link into s2 port 4): same entries, other path.
    actual = path((1, 1, 4, R1), (2, 4, 2, R2), (3, 1, 2, R3))
    assert tags_of(actual)[1] == tags_of(GOOD)[1]
    v = compare(Alternatives([expected(GOOD)]), *tags_of(actual), ALL_PORTS)
    assert v.kind == TYPE_P_ACTION and v.culprit == 1


def test_match_fault_same_path() -> None:
    hidden = rule(100, 0, cookie=0xBAD)
    actual = path((1, 1, 2, R1), (2, 1, 2, hidden), (3, 1, 2, R3))
    v = compare(Alternatives([expected(GOOD)]), *tags_of(actual), ALL_PORTS)
    assert v.kind == TYPE_P_MATCH and set(v.candidates) == {1, 2, 3}
    assert v.culprit is None


def test_match_fault_narrowed_by_known_entries() -> None:
    other = rule(5, 77)  # an intended entry on s2 that the packet should not have matched
    actual = path((1, 1, 2, R1), (2, 1, 2, other), (3, 1, 2, R3))
    known = {1: [R1], 2: [R2, other], 3: [R3]}
    v = compare(Alternatives([expected(GOOD)]), *tags_of(actual), ALL_PORTS, known.get)
    assert v.kind == TYPE_P_MATCH and v.candidates[0] == 2 and v.culprit == 2


def test_type_a() -> None:
    actual = path((1, 1, 2, rule(1)), (2, 1, 2, rule(1)), (3, 1, 2, rule(1)))
    v = compare(Alternatives([]), *tags_of(actual), ALL_PORTS)
    assert v.kind == TYPE_A and {1, 2, 3} <= set(v.candidates)


def test_multipath_longest_prefix() -> None:
    via4 = path((1, 1, 3, R1), (4, 1, 2, R4), (3, 3, 2, R3))
    alts = Alternatives([expected(GOOD), expected(via4)])
    assert compare(alts, *tags_of(via4), ALL_PORTS) is None
    # Went s1 -> s2 and then s2 misrouted to s4: the GOOD alternative matches 2 hops.
    actual = path((1, 1, 2, R1), (2, 1, 3, R2), (4, 2, 2, R4), (3, 3, 2, R3))
    v = compare(alts, *tags_of(actual), ALL_PORTS)
    assert v.kind == TYPE_P_ACTION and v.culprit == 2 and v.expected.hops == GOOD


def test_wrong_ingress() -> None:
    actual = path((4, 4, 2, R4), (3, 3, 2, R3))
    v = compare(Alternatives([expected(GOOD)]), *tags_of(actual), ALL_PORTS)
    assert v.kind == TYPE_A and v.missing_hop == 0 and {3, 4} <= set(v.candidates)


def test_first_missing_hop() -> None:
    vp, _ = tags_of(GOOD)
    assert first_missing_hop(GOOD, vp) == 3
    assert first_missing_hop(GOOD, 0) == 0


def test_a_detour_whose_extra_bits_name_no_hop_keeps_the_expected_switches() -> None:
    """Every expected hop present, plus Bloom bits that make up no whole (switch, port):
    the switches the packet could have left the expected path at are the expected path's,
    never an empty location."""
    from tester.detect import in_filter

    vp, vr = tags_of(GOOD)
    spare = next(
        b
        for b in range(64)
        if not (vp >> b) & 1
        and not any(in_filter(vp | 1 << b, p) and not in_filter(vp, p) for p in ALL_PORTS)
    )
    v = compare(Alternatives([expected(GOOD)]), vp | 1 << spare, vr, ALL_PORTS)
    assert v.kind == TYPE_P_ACTION and v.location.startswith("detour:")
    assert set(v.candidates) == {h.dpid for h in GOOD} and v.location != "detour:"


def test_hop_misroute_onto_a_link_other_ingresses_take() -> None:
    """A per-hop sample at s4:1 of a packet that came in at s1:1 and that s1 sent out of
    port 3. The model brings the header to s4:1 too, but only from another ingress (s1:5,
    routed by in_port). The tags are those of the intended path as it leaves s1, so s1
    misrouted it: Type-p action at s1, not a Type-a fault for the ingress it came from."""
    r1b = rule(20, 11)
    other = path((1, 5, 3, r1b))  # ingress s1:5, sent to s4 on purpose
    ports = ALL_PORTS + [(1, 5)]
    here = Alternatives([expected(other)])
    via = Alternatives([expected(GOOD[:1]), expected(other)])
    actual = path((1, 1, 3, R1))  # R1 matched, out of the wrong port
    v = compare_hop(here, via, 1, *tags_of(actual), ports)
    assert (v.kind, v.culprit, v.location) == (TYPE_P_ACTION, 1, "dpid:1")
    assert v.expected.ingress == (1, 1)
    # Tags no prefix through s1 has (another entry matched at s1): compare() over the
    # prefixes that do arrive here, whose ingress is not in the filter: Type-a.
    stray = path((1, 1, 3, rule(30, 12)))
    assert compare_hop(here, via, 1, *tags_of(stray), ports).kind == TYPE_A
    # The intended arrival from s1:5 is consistent.
    assert compare_hop(here, via, 1, *tags_of(other), ports) is None
