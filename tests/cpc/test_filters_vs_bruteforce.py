"""Networks with ACL tables against the brute-force data plane, after every FlowMod.

Each switch filters in table 0 (entries that drop, or go to table 1, on fields the routes
do not match: source, protocol, port) and routes in table 1 (destination prefixes); some
switches keep their ACL lines in the routing table instead, as pazzdata's workloads do.
ACLs cut the forwarding classes into many classes that differ only at a few elements,
which is where walks reuse suffixes across classes (cpc.walk.Walker.xmemo).
"""

from __future__ import annotations

import contextlib
from collections import Counter

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cpc.model import Model
from cpc.refdp import RefDataPlane
from cpc.rules import FlowMod, Instructions, Match, ModelError
from tests.cpc.netgen import DSTS, networks
from tests.cpc.test_model_vs_bruteforce import apply_checking_updates, unique_priorities

SRCS = [0xC0A80000 + i for i in range(4)]  # 192.168.0.0 .. 192.168.0.3
PORTS = [22, 80, 443]


@st.composite
def acl_matches(draw):
    values = {"eth_type": (0x0800, 0xFFFF)}
    if draw(st.booleans()):
        plen = draw(st.sampled_from([30, 31, 32]))
        mask = (0xFFFFFFFF << (32 - plen)) & 0xFFFFFFFF
        values["ipv4_src"] = (draw(st.sampled_from(SRCS)) & mask, mask)
    if draw(st.booleans()):
        values["ip_proto"] = (6, 0xFF)
        if draw(st.booleans()):
            values["tp_dst"] = (draw(st.sampled_from(PORTS)), 0xFFFF)
    return Match.build(values)


@st.composite
def route_matches(draw):
    plen = draw(st.sampled_from([29, 30, 31, 32]))
    mask = (0xFFFFFFFF << (32 - plen)) & 0xFFFFFFFF
    return Match.build(
        {"eth_type": (0x0800, 0xFFFF), "ipv4_dst": (draw(st.sampled_from(DSTS)) & mask, mask)}
    )


@st.composite
def filter_flowmods(draw, topo, inline: frozenset):
    """An ACL line (drop, or permit to the routing table) or a route, added or deleted."""
    dpid = draw(st.sampled_from(sorted(topo.switches)))
    ports = topo.ports_of(dpid)
    route_table = 0 if dpid in inline else 1
    if draw(st.booleans()):
        table, match = route_table, draw(route_matches())
        ins = Instructions((("output", draw(st.sampled_from(ports))),))
        priority = draw(st.integers(1, 20))
    else:
        table, match = 0, draw(acl_matches())
        permit = route_table == 1 and draw(st.booleans())
        ins = Instructions((), (), False, 1) if permit else Instructions(())
        priority = draw(st.integers(21, 40))
    command = draw(st.sampled_from(["add"] * 3 + ["delete_strict", "modify_strict"]))
    if command == "modify_strict" and table == 0:
        command = "delete_strict"
    return FlowMod(command, dpid, table, priority, match, instructions=ins)


def permit_all(dpid: int) -> FlowMod:
    """The lowest ACL line: what no line denies goes on to the routing table."""
    return FlowMod("add", dpid, 0, 0, Match.build({}), instructions=Instructions((), (), False, 1))


@st.composite
def filter_scenarios(draw):
    topo = draw(networks())
    inline = frozenset(d for d in topo.switches if draw(st.integers(0, 3)) == 0)
    fms = [permit_all(d) for d in sorted(topo.switches) if d not in inline]
    fms += draw(st.lists(filter_flowmods(topo, inline), min_size=4, max_size=20))
    hs = [
        {
            "eth_type": 0x0800,
            "ipv4_dst": draw(st.sampled_from(DSTS)),
            "ipv4_src": draw(st.sampled_from(SRCS)),
            "ip_proto": 6,
            "tp_dst": draw(st.sampled_from(PORTS)),
        }
        for _ in range(draw(st.integers(2, 5)))
    ]
    return topo, fms, hs


def expected_by_egress(model, topo, h) -> dict:
    return {
        eg: Counter(
            (x.ingress, x.hops, x.verify_port, x.verify_rule) for x in model.expected(eg, h)
        )
        for eg in topo.edge_ports()
    }


def check_against_bruteforce(model, topo, hs) -> None:
    ref = RefDataPlane(topo, model.entries(), model.groups())
    edges = topo.edge_ports()
    for h in hs:
        want: dict = {eg: Counter() for eg in edges}
        delivered = set()
        for ing in edges:
            for d in ref.send(ing, h):
                if d.kind == "egress":
                    want[d.egress][(d.ingress, d.hops, d.verify_port, d.verify_rule)] += 1
                    delivered.add((ing, d.egress))
        assert expected_by_egress(model, topo, h) == want, h
        hdr = model.space.header_bdd(h)
        for ing in edges:
            for eg in edges:
                got = model.reach(ing, eg) & hdr != model.space.false
                assert got == ((ing, eg) in delivered), (ing, eg, h)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(filter_scenarios())
def test_acl_networks_equal_bruteforce_and_rebuilt_after_every_flowmod(sc):
    """expected() and reach() as the brute force has them, the same as a model rebuilt from
    the entries, and every pair whose S_i or S_e changed named by the update."""
    topo, fms, hs = sc
    model = Model(topo)
    model.add_entries([])

    def check() -> None:
        check_against_bruteforce(model, topo, hs)
        rebuilt = Model(topo)
        rebuilt.add_entries(model.entries())
        for h in hs:
            assert expected_by_egress(model, topo, h) == expected_by_egress(rebuilt, topo, h)
        for ing in topo.edge_ports():
            for eg in topo.edge_ports():
                a, b = model.reach(ing, eg), rebuilt.reach(ing, eg)
                assert list(model.space.cubes(a)) == list(rebuilt.space.cubes(b))
        assert Counter(lp.delivery for lp in model.loops()) == Counter(
            lp.delivery for lp in rebuilt.loops()
        )

    apply_checking_updates(model, fms, check)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(filter_scenarios())
def test_split_class_counts_are_the_classes_of_each_set_of_elements_alone(sc):
    """Counted as APKeep does, the forwarding classes are those of a network holding only the
    entries of the elements that forward, the filter classes those of the filters alone."""
    topo, fms, _ = sc
    model = Model(topo)
    model.add_entries([])
    for fm in fms:
        if fm.command == "add" and not unique_priorities(model, fm):
            continue
        with contextlib.suppress(ModelError):
            model.apply(fm)
    filters = model.filter_elements()
    for el in model._elem_list:
        acts = {e.instructions for e in el.ident.entries() if not e.instructions.drops()}
        assert (el.idx in filters) == (len(acts) <= 1)
    alone = []
    for keep in (lambda i: i not in filters, lambda i: i in filters):
        m = Model(topo)
        m.add_entries([e for el in model._elem_list if keep(el.idx) for e in el.ident.entries()])
        alone.append(m.class_count())
    assert model.split_class_counts() == tuple(alone)
